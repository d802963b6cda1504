package campaign

import (
	"fmt"
	"io"
	"sync"
	"time"

	"tokenbed/experiments/campaign"
	"tokenbed/internal/results"
)

// Progress prints a campaign's progress: one plain line as each job
// starts and ends, and on a terminal a status line rewritten each second
// with the job's elapsed time against its estimate.
type Progress struct {
	w    io.Writer
	tty  bool
	mu   sync.Mutex
	stop chan struct{}
	done chan struct{}
}

// NewProgress prints to w; tty: w is a terminal.
func NewProgress(w io.Writer, tty bool) *Progress { return &Progress{w: w, tty: tty} }

// Start says job i of n started.
func (p *Progress) Start(i, n int, j *campaign.Job) {
	p.mu.Lock()
	defer p.mu.Unlock()
	est := ""
	if j.Estimate > 0 {
		est = fmt.Sprintf(" (estimate %v)", j.Estimate)
	}
	fmt.Fprintf(p.w, "[%d/%d] %s: %s started%s\n", i+1, n, j.Name, j.Kind(), est)
	if !p.tty {
		return
	}
	p.stop, p.done = make(chan struct{}), make(chan struct{})
	go p.tick(i, n, j, time.Now(), p.stop, p.done)
}

func (p *Progress) tick(i, n int, j *campaign.Job, t0 time.Time, stop, done chan struct{}) {
	defer close(done)
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-stop:
			fmt.Fprint(p.w, "\r\033[K")
			return
		case <-t.C:
			el := time.Since(t0).Truncate(time.Second)
			line := fmt.Sprintf("[%d/%d] %s: %v", i+1, n, j.Name, el)
			if j.Estimate > 0 {
				line += fmt.Sprintf(" of about %v (%.0f%%)", j.Estimate, 100*el.Seconds()/j.Estimate.Seconds())
			}
			p.mu.Lock()
			fmt.Fprint(p.w, "\r\033[K"+line)
			p.mu.Unlock()
		}
	}
}

// End says job i of n ended.
func (p *Progress) End(i, n int, j results.JobInfo) {
	if p.stop != nil {
		close(p.stop)
		<-p.done
		p.stop = nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	line := fmt.Sprintf("[%d/%d] %s: %s in %v", i+1, n, j.Name, j.Status, time.Duration(j.Seconds*float64(time.Second)).Truncate(100*time.Millisecond))
	if j.Detail != "" {
		line += ": " + j.Detail
	}
	fmt.Fprintln(p.w, line)
}

// Done says how the campaign ended.
func (p *Progress) Done(c results.CampaignInfo) {
	p.mu.Lock()
	defer p.mu.Unlock()
	counts := map[string]int{}
	for _, j := range c.Jobs {
		counts[j.Status]++
	}
	fmt.Fprintf(p.w, "campaign %s: %s in %v (%d passed, %d failed, %d error, %d interrupted)\n", c.ID, c.Status,
		c.Ended.Sub(c.Started).Truncate(time.Second), counts[JobPassed], counts[JobFailed], counts[JobError], counts[JobInterrupted])
}
