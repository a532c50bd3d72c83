package audit

import (
	"bufio"
	"container/heap"
	"encoding/gob"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
)

// objectSpool keeps the objects view's rows in a temporary file, sorted in runs of spoolRunRows, and
// merges the runs as the report is written: memory holds one run and a buffer per run, whatever the
// number of Windows objects (Options.ObjectsOnDisk). gob, not JSON, so that every string comes back
// byte for byte, as encoding/json would have seen it in memory.
type objectSpool struct {
	file  *os.File
	w     *countingWriter // the end of the file
	run   []ObjectRow     // the run being filled
	runs  []spoolRun
	count int
	err   error // the first write that failed; the report cannot be written without the rows
}

// spoolRun is one sorted run: a gob stream of rows at [off, off+size) of the file.
type spoolRun struct{ off, size int64 }

// spoolRunRows bounds the rows held in memory (some 250 bytes each).
const spoolRunRows = 4096

func newObjectSpool() (*objectSpool, error) {
	f, err := os.CreateTemp("", "wincompat-audit-objects-")
	if err != nil {
		return nil, err
	}
	return &objectSpool{file: f, w: &countingWriter{w: bufio.NewWriter(f)}}, nil
}

func (s *objectSpool) add(row ObjectRow) {
	s.count++
	s.run = append(s.run, row)
	if len(s.run) == spoolRunRows {
		s.flush()
	}
}

// flush writes the rows held as one sorted run.
func (s *objectSpool) flush() {
	if len(s.run) == 0 || s.err != nil {
		s.run = s.run[:0]
		return
	}
	slices.SortStableFunc(s.run, compareObjects)
	// A gob stream of its own, type first, so that each run is read on its own.
	start, enc := s.w.n, gob.NewEncoder(s.w)
	for i := range s.run {
		if s.err = enc.Encode(&s.run[i]); s.err != nil {
			return
		}
	}
	s.runs = append(s.runs, spoolRun{off: start, size: s.w.n - start})
	s.run = s.run[:0]
}

// each calls f with every row, sorted as objectRows.sorted sorts them: by namespace, kind and name, in
// the order added among equals (runs are merged in order on ties).
func (s *objectSpool) each(f func(*ObjectRow) error) error {
	s.flush()
	if s.err == nil {
		s.err = s.w.w.Flush()
	}
	if s.err != nil {
		return fmt.Errorf("the objects' rows in %s: %w", s.file.Name(), s.err)
	}
	m := &runMerge{}
	for i, r := range s.runs {
		c := &runCursor{index: i, dec: gob.NewDecoder(bufio.NewReader(io.NewSectionReader(s.file, r.off, r.size)))}
		if err := c.next(); err != nil {
			return err
		}
		if c.ok {
			m.cursors = append(m.cursors, c)
		}
	}
	heap.Init(m)
	for m.Len() > 0 {
		c := m.cursors[0]
		if err := f(&c.row); err != nil {
			return err
		}
		if err := c.next(); err != nil {
			return err
		}
		if c.ok {
			heap.Fix(m, 0)
		} else {
			heap.Pop(m)
		}
	}
	return nil
}

// close removes the file.
func (s *objectSpool) close() error {
	return errors.Join(s.file.Close(), os.Remove(s.file.Name()))
}

// countingWriter counts what is written, so that each run knows where it starts and ends.
type countingWriter struct {
	w *bufio.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// runCursor is the next row of one run.
type runCursor struct {
	index int
	dec   *gob.Decoder
	row   ObjectRow
	ok    bool
}

func (c *runCursor) next() error {
	c.row = ObjectRow{}
	err := c.dec.Decode(&c.row)
	c.ok = err == nil
	if errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

// runMerge is a heap of the runs' next rows, the least first, the earlier run first among equals.
type runMerge struct{ cursors []*runCursor }

func (m *runMerge) Len() int { return len(m.cursors) }
func (m *runMerge) Less(i, j int) bool {
	if c := compareObjects(m.cursors[i].row, m.cursors[j].row); c != 0 {
		return c < 0
	}
	return m.cursors[i].index < m.cursors[j].index
}
func (m *runMerge) Swap(i, j int) { m.cursors[i], m.cursors[j] = m.cursors[j], m.cursors[i] }
func (m *runMerge) Push(x any)    { m.cursors = append(m.cursors, x.(*runCursor)) }
func (m *runMerge) Pop() any {
	last := m.cursors[len(m.cursors)-1]
	m.cursors = m.cursors[:len(m.cursors)-1]
	return last
}
