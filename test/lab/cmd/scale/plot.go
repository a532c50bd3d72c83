package main

import (
	"fmt"
	"image/color"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/wincompat/wincompat/test/lab/perf"
)

// writePlot draws memory against pods into a PNG at path: the medians of the leader's and follower's
// live heap (solid) and RSS (dashed) at each size, the leader heap's fitted line continued to 150,000
// pods (dotted), and the goal of 96 MiB and the memory limit as horizontal lines.
func writePlot(rep *labReport, path string) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("wincompat %s serve, two replicas: memory against pods (medians of %d run(s))", rep.Version, len(rep.Runs))
	p.X.Label.Text = "pods in the cluster (thousands; nodes = pods/30, Events = pods/2, 10% Windows)"
	p.Y.Label.Text = "MiB"
	p.Legend.Top, p.Legend.Left = true, true
	p.Add(plotter.NewGrid())
	stages := append([]stage{rep.Baseline}, rep.Sizes...)
	for i, name := range seriesOrder {
		f := series[name]
		xys := make(plotter.XYs, len(stages))
		for k := range stages {
			xys[k] = plotter.XY{X: float64(stages[k].Pods) / 1000, Y: f(&stages[k])}
		}
		l, pts, err := plotter.NewLinePoints(xys)
		if err != nil {
			return err
		}
		// One color per replica and measure; the RSS dashed, the peak dotted.
		c := plotutil.Color(i)
		l.Color, pts.Color = c, c
		l.Width = vg.Points(1.5)
		switch {
		case strings.HasSuffix(name, "peak RSS"):
			l.Dashes = []vg.Length{vg.Points(2), vg.Points(2)}
		case strings.HasSuffix(name, "RSS"):
			l.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
		}
		p.Add(l, pts)
		p.Legend.Add(name, l, pts)
	}
	xmax := float64(rep.Sizes[len(rep.Sizes)-1].Pods) / 1000
	if f, ok := rep.slopes["leader heap"]; ok {
		at := func(pods float64) float64 { return f.At150k - f.PerThousand*(extrapolateTo-pods)/1000 }
		l, err := plotter.NewLine(plotter.XYs{{X: float64(rep.Sizes[0].Pods) / 1000, Y: at(float64(rep.Sizes[0].Pods))}, {X: extrapolateTo / 1000, Y: f.At150k}})
		if err != nil {
			return err
		}
		l.Color, l.Dashes = plotutil.Color(0), []vg.Length{vg.Points(1), vg.Points(4)}
		p.Add(l)
		p.Legend.Add(fmt.Sprintf("leader heap, linear: %.2f MiB per 1,000 pods, %.0f MiB at 150k", f.PerThousand, f.At150k), l)
		xmax = extrapolateTo / 1000
	}
	for _, h := range []struct {
		y     float64
		label string
	}{{96, "goal: leader heap at 150k ≤ 96 MiB"}, {rep.LimitMiB, fmt.Sprintf("memory limit (%.0f MiB)", rep.LimitMiB)}} {
		l, err := plotter.NewLine(plotter.XYs{{X: 0, Y: h.y}, {X: xmax, Y: h.y}})
		if err != nil {
			return err
		}
		l.Color = color.Gray{Y: 120}
		l.Dashes = []vg.Length{vg.Points(8), vg.Points(4)}
		p.Add(l)
		p.Legend.Add(h.label, l)
	}
	p.Y.Min, p.Y.Max = 0, max(p.Y.Max, rep.LimitMiB*1.05)
	img := vgimg.New(10*vg.Inch, 6*vg.Inch)
	dc := draw.New(img)
	dc.SetColor(color.White)
	dc.Fill(dc.Rectangle.Path())
	p.Draw(dc)
	return perf.SavePNG(img, path)
}
