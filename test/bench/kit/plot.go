package kit

import (
	"fmt"
	"image/color"
	"sort"

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

// PlotLines draws one line per series (in name order, the second dashed)
// to an SVG file.
func PlotLines(path string, axes Axes, series map[string][]Point) error {
	p := plot.New()
	p.Title.Text = axes.Title
	p.X.Label.Text = axes.X
	p.Y.Label.Text = axes.Y
	p.Y.Min = 0
	p.Legend.Top = true
	p.Legend.Left = true
	p.Add(plotter.NewGrid())
	names := make([]string, 0, len(series))
	for name := range series {
		names = append(names, name)
	}
	sort.Strings(names)
	colors := []color.Color{color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}, color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}, color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}}
	for i, name := range names {
		pts := make(plotter.XYs, 0, len(series[name]))
		for _, s := range series[name] {
			pts = append(pts, plotter.XY{X: s.X, Y: s.Y})
		}
		l, err := plotter.NewLine(pts)
		if err != nil {
			return fmt.Errorf("plotting %s: %w", name, err)
		}
		l.Color = colors[i%len(colors)]
		l.Width = vg.Points(1.5)
		if i == 1 {
			l.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
		}
		p.Add(l)
		p.Legend.Add(name, l)
	}
	if err := p.Save(8*vg.Inch, 4.5*vg.Inch, path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
