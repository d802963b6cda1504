// Package serve is the results browser (`harness serve`): server-rendered
// HTML pages over the results database (internal/resultsdb) and the
// results directories it indexes, which stay the source of truth. After
// Jepsen's `lein run serve`: every run with its verdict, its checks, the
// paper's figures beside its own, its plots and its failure bundles.
//
// # Pages
//
//	/                              campaigns, and runs filtered by experiment, backend, verdict, revision, campaign
//	/campaigns/ID                  one campaign: its jobs and its runs
//	/runs/ID                       one run: checks, figures beside the paper's, plots, failure bundles, files
//	/runs/ID/bundles/NAME          one failure bundle: its README, the decoded capture slice (analysis/pcaptimeline), its events
//	/runs/ID/files/PATH            a file of the run's directory (?download=1: as an attachment)
//	/figures/NAME?job=J            one figure across nights, judged by analysis/trend as `harness trend --job J` judges it
//	/trend?job=J                   every figure of a job at its latest night, as `harness trend --job J --all`
//	/compare?a=ID&b=ID             two runs side by side (analysis/crossval, as `harness compare`)
//
// # Confinement
//
// Every file served is opened through an os.Root at the results root: a
// request path with "..", an absolute path, or a symbolic link that leads
// out of the root is refused (403), and so is a run whose indexed
// directory is not a local path under the root. Pages carry a content
// security policy that allows no script, and files from the results
// directories (an SVG plot could hold one) are served under a stricter
// one.
//
// No page runs JavaScript; filters are plain GET forms, so every view is
// a URL.
package serve
