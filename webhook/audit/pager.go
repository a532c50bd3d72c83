package audit

import (
	"context"
	"fmt"
	"io"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// pager lists page by page (limit and continue), so memory holds one page at a time, and reports its
// progress when listing takes longer than a second.
type pager struct {
	c        client.Reader
	pageSize int64
	progress io.Writer // nil for no progress lines
	listed   int
	start    time.Time
	lastProg time.Time
}

func (p *pager) list(ctx context.Context, ns string, newList func() client.ObjectList, sel labels.Selector, visit func(client.ObjectList), extra ...client.ListOption) error {
	cont := ""
	for {
		l := newList()
		opts := []client.ListOption{client.Limit(p.pageSize), client.Continue(cont)}
		if ns != "" {
			opts = append(opts, client.InNamespace(ns))
		}
		if sel != nil {
			opts = append(opts, client.MatchingLabelsSelector{Selector: sel})
		}
		opts = append(opts, extra...)
		if err := p.c.List(ctx, l, opts...); err != nil {
			return err
		}
		visit(l)
		p.count(l)
		cont = l.(metav1.ListInterface).GetContinue()
		if cont == "" {
			return nil
		}
	}
}

func (p *pager) count(l client.ObjectList) {
	if items, err := apimeta.ExtractList(l); err == nil {
		p.listed += len(items)
	}
	if p.progress == nil || time.Since(p.start) < time.Second || time.Since(p.lastProg) < 200*time.Millisecond {
		return
	}
	p.lastProg = time.Now()
	fmt.Fprintf(p.progress, "\rread %d objects...", p.listed)
}

// done ends the progress line, if one was written.
func (p *pager) done() {
	if p.progress != nil && time.Since(p.start) > time.Second {
		fmt.Fprintf(p.progress, "\rread %d objects in %s\n", p.listed, time.Since(p.start).Round(time.Millisecond))
	}
}
