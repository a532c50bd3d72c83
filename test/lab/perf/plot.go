package perf

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/wincompat/wincompat/test/lab/perf/load"
)

// WritePlot draws the latency distributions of r into a PNG at path: on the left the reviews at the
// fixed rate, then pod creation through the API server with (solid) and without (dashed) the webhook,
// at the fixed rate when there is one, then the engines at their fixed rate (no mutation dashed), on
// the right the image-resolution phases at their rates. The x axis is the percentile on a log scale of 1/(1-p), so the tail gets as much room as
// the median; the y axis is the latency on a log scale.
func WritePlot(r *Results, path string) error {
	var row []*plot.Plot
	if r.Reviews != nil {
		p := newPercentilePlot(fmt.Sprintf("wincompat serve, GOMAXPROCS=%d: reviews at %.0f%% of each maximum", r.Reviews.GOMAXPROCS, 100*r.Reviews.LoadFraction))
		for i, s := range r.Reviews.Scenarios {
			label := fmt.Sprintf("%s, %.0f/s", s.Name, s.Fixed.TargetRate)
			if err := addLine(p, label, s.Fixed.Distribution, i, false); err != nil {
				return err
			}
		}
		row = append(row, p)
	}
	if a := r.APIServer; a != nil {
		// At a fixed rate the latencies are the creations' own; at the maximum they are mostly queueing.
		title := fmt.Sprintf("pod creation via kube-apiserver, %d creators at full speed", a.Creators)
		if a.Rate > 0 {
			title = fmt.Sprintf("pod creation via kube-apiserver at %.0f pods/s", a.Rate)
		}
		p := newPercentilePlot(title + ": with wincompat (solid), without (dashed)")
		for i, k := range a.Kinds {
			c := &k.Max
			if a.Rate > 0 && k.Fixed != nil {
				c = k.Fixed
			}
			if err := addLine(p, k.Name+", with", c.With.Distribution, i, false); err != nil {
				return err
			}
			if err := addLine(p, k.Name+", without", c.Without.Distribution, i, true); err != nil {
				return err
			}
		}
		row = append(row, p)
	}
	if en := r.Engines; en != nil {
		p := newPercentilePlot(fmt.Sprintf("the Windows chart pod via kube-apiserver at %.0f pods/s, by engine (%d rounds merged)", en.Rate, en.Rounds))
		for i, e := range en.Engines {
			if err := addLine(p, e.Name, e.FixedMerged.Distribution, i, e.Name == "none"); err != nil {
				return err
			}
		}
		row = append(row, p)
	}
	if im := r.Images; im != nil {
		p := newPercentilePlot(fmt.Sprintf("image resolution, GOMAXPROCS=%d: fixed-rate phases (lookup deadline %.0f ms)", im.GOMAXPROCS, im.LookupTimeoutMs))
		i := 0
		for _, ph := range im.Phases {
			if ph.Load == "max" {
				continue // closed loop: the latency is queueing
			}
			if err := addLine(p, ph.Scenario+", "+ph.Load, ph.Distribution, i, false); err != nil {
				return err
			}
			i++
		}
		row = append(row, p)
	}
	if len(row) == 0 {
		return fmt.Errorf("nothing to plot")
	}
	img := vgimg.New(vg.Length(len(row))*8*vg.Inch, 5*vg.Inch)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 1, Cols: len(row), PadX: vg.Inch / 4, PadTop: vg.Inch / 8, PadBottom: vg.Inch / 8, PadLeft: vg.Inch / 8, PadRight: vg.Inch / 8}
	dc.SetColor(color.White)
	dc.Fill(dc.Rectangle.Path())
	canvases := plot.Align([][]*plot.Plot{row}, tiles, dc)
	for i, p := range row {
		p.Draw(canvases[0][i])
	}
	return SavePNG(img, path)
}

// SavePNG writes img to path as a PNG, making its directory.
func SavePNG(img *vgimg.Canvas, path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func newPercentilePlot(title string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "percentile"
	p.Y.Label.Text = "latency (ms)"
	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
	p.X.Tick.Marker, p.Y.Tick.Marker = percentileTicks{}, oneTwoFiveTicks{}
	// The curves rise to the right, so the lower right corner is where the legend hides nothing.
	p.Legend.Top, p.Legend.Left = false, false
	p.Add(plotter.NewGrid())
	return p
}

func addLine(p *plot.Plot, label string, points []load.Point, i int, dashed bool) error {
	if len(points) == 0 {
		return nil
	}
	xys := make(plotter.XYs, len(points))
	for j, pt := range points {
		xys[j] = plotter.XY{X: 1 / (1 - pt.Percentile/100), Y: max(pt.Ms, 0.001)}
	}
	l, err := plotter.NewLine(xys)
	if err != nil {
		return err
	}
	l.Color = plotutil.Color(i)
	l.Width = vg.Points(1.5)
	if dashed {
		l.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
	}
	p.Add(l)
	p.Legend.Add(label, l)
	return nil
}

// percentileTicks labels x = 1/(1-p) with p: 0%, 50%, 90%, 99%, 99.9%, ...
type percentileTicks struct{}

func (percentileTicks) Ticks(lo, hi float64) []plot.Tick {
	var ticks []plot.Tick
	for x := 1.0; x <= hi*1.0001; x *= 10 {
		for _, v := range []float64{x, 2 * x, 5 * x} {
			if v < lo || v > hi*1.0001 {
				continue
			}
			t := plot.Tick{Value: v} // minor ticks at 2 and 5: 95%, 98%, 99.5%, ...
			if v == x || v == 2 {
				t.Label = strconv.FormatFloat(100*(1-1/v), 'f', -1, 64) + "%"
			}
			ticks = append(ticks, t)
		}
	}
	return ticks
}

// oneTwoFiveTicks labels a log axis at 1, 2 and 5 times each power of ten.
type oneTwoFiveTicks struct{}

func (oneTwoFiveTicks) Ticks(lo, hi float64) []plot.Tick {
	var ticks []plot.Tick
	for decade := math.Pow(10, math.Floor(math.Log10(lo))); decade <= hi; decade *= 10 {
		for _, m := range []float64{1, 2, 5} {
			if v := decade * m; v >= lo && v <= hi {
				ticks = append(ticks, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'g', 3, 64)})
			}
		}
	}
	if len(ticks) < 2 { // a narrow range: label its ends
		ticks = []plot.Tick{{Value: lo, Label: strconv.FormatFloat(lo, 'g', 3, 64)}, {Value: hi, Label: strconv.FormatFloat(hi, 'g', 3, 64)}}
	}
	return ticks
}
