# teardown's image: the CLI binary, which is also the controller
# (`teardown controller`). Build: docker build -t teardown:TAG .
FROM golang:1.26 AS build
WORKDIR /src
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o /teardown ./cmd/teardown

FROM scratch
COPY --from=build /teardown /teardown
USER 65532:65532
ENTRYPOINT ["/teardown"]
