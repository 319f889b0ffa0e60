package kit

import (
	"fmt"
	"image/color"
	"maps"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// Point is one (x, y) of a plotted line.
type Point struct{ X, Y float64 }

// Axes name a plot and its axes.
type Axes struct {
	Title, X, Y string
}

// Series is one plotted line and how it is drawn.
type Series struct {
	Name   string
	Points []Point
	Color  int  // index into the palette: blue, red, green
	Dashed bool // for a second line of one colour, or a second arm
	Marked bool // a dot at each point: the measured ones, where a line joins a few
}

var palette = []color.Color{color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}, color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}, color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}}

// PlotLines draws one line per series (in name order, each in a colour of
// its own, the second dashed) to an SVG file.
func PlotLines(path string, axes Axes, series map[string][]Point) error {
	lines := make([]Series, 0, len(series))
	for i, name := range slices.Sorted(maps.Keys(series)) {
		lines = append(lines, Series{Name: name, Points: series[name], Color: i, Dashed: i == 1})
	}
	return Plot(path, axes, lines)
}

// Plot draws lines, in order and each as it says, to an SVG file.
func Plot(path string, axes Axes, lines []Series) error {
	p := plot.New()
	p.Title.Text = axes.Title
	p.X.Label.Text = axes.X
	p.Y.Label.Text = axes.Y
	p.Y.Min = 0
	p.Legend.Top = true
	p.Legend.Left = true
	p.Add(plotter.NewGrid())
	for _, s := range lines {
		pts := make(plotter.XYs, 0, len(s.Points))
		for _, pt := range s.Points {
			pts = append(pts, plotter.XY{X: pt.X, Y: pt.Y})
		}
		l, dots, err := plotter.NewLinePoints(pts)
		if err != nil {
			return fmt.Errorf("plotting %s: %w", s.Name, err)
		}
		c := palette[s.Color%len(palette)]
		l.Color = c
		l.Width = vg.Points(1.5)
		if s.Dashed {
			l.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
		}
		p.Add(l)
		if s.Marked {
			dots.Color = c
			p.Add(dots)
			p.Legend.Add(s.Name, l, dots)
		} else {
			p.Legend.Add(s.Name, l)
		}
	}
	if err := p.Save(8*vg.Inch, 4.5*vg.Inch, path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
