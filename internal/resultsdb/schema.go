package resultsdb

// SchemaVersion is the schema this package writes and reads, kept in
// `PRAGMA user_version`. A database at an older version is migrated by
// Open; one at a newer version is refused (a newer harness wrote it).
const SchemaVersion = 1

// migrations[v] takes a database from user_version v to v+1. Every step
// runs in one transaction with the version bump, so a crash mid-migration
// leaves the older version whole.
var migrations = []string{
	0: `
CREATE TABLE campaigns (
	id       TEXT PRIMARY KEY,
	file     TEXT NOT NULL DEFAULT '',
	started  TEXT NOT NULL DEFAULT '',
	ended    TEXT NOT NULL DEFAULT '',
	status   TEXT NOT NULL DEFAULT '',   -- running | passed | failed | interrupted
	revision TEXT NOT NULL DEFAULT '',
	host     TEXT NOT NULL DEFAULT ''
);
CREATE TABLE jobs (
	campaign TEXT NOT NULL,
	name     TEXT NOT NULL,
	kind     TEXT NOT NULL DEFAULT '',   -- experiment | study
	status   TEXT NOT NULL DEFAULT '',   -- running | passed | failed | error | interrupted
	started  TEXT NOT NULL DEFAULT '',
	ended    TEXT NOT NULL DEFAULT '',
	seconds  REAL NOT NULL DEFAULT 0,
	detail   TEXT NOT NULL DEFAULT '',
	PRIMARY KEY (campaign, name)
);
CREATE TABLE runs (
	id         TEXT PRIMARY KEY,         -- the run ID, the results directory's name
	campaign   TEXT NOT NULL DEFAULT '',
	job        TEXT NOT NULL DEFAULT '',
	experiment TEXT NOT NULL DEFAULT '',
	protocol   TEXT NOT NULL DEFAULT '',
	backend    TEXT NOT NULL DEFAULT '',
	revision   TEXT NOT NULL DEFAULT '',
	dirty      INTEGER NOT NULL DEFAULT 0,
	seed       INTEGER NOT NULL DEFAULT 0,
	host       TEXT NOT NULL DEFAULT '',
	cores      INTEGER NOT NULL DEFAULT 0,
	kernel     TEXT NOT NULL DEFAULT '',
	started    TEXT NOT NULL DEFAULT '',
	ended      TEXT NOT NULL DEFAULT '',
	status     TEXT NOT NULL DEFAULT '',  -- pass | fail | error | interrupted | running
	overrides  TEXT NOT NULL DEFAULT '',  -- the campaign's overrides, JSON object path → value
	dir        TEXT NOT NULL DEFAULT '',  -- relative to the results root
	damaged    TEXT NOT NULL DEFAULT ''   -- '' or why the directory could not be fully read
);
CREATE INDEX runs_by_job ON runs (job, started);
CREATE INDEX runs_by_experiment ON runs (experiment, backend, started);
CREATE INDEX runs_by_campaign ON runs (campaign);
CREATE TABLE checks (
	run     TEXT NOT NULL,
	name    TEXT NOT NULL,
	verdict TEXT NOT NULL DEFAULT '',    -- pass | fail | not_judged
	value   TEXT NOT NULL DEFAULT '',
	detail  TEXT NOT NULL DEFAULT '',
	PRIMARY KEY (run, name)
);
CREATE TABLE figures (
	run   TEXT NOT NULL,
	name  TEXT NOT NULL,
	value REAL,
	unit  TEXT NOT NULL DEFAULT '',
	n     INTEGER NOT NULL DEFAULT 0,   -- samples behind the value, 0 when not a statistic
	lo    REAL,                         -- the interval, NULL where none exists
	hi    REAL,
	paper REAL,                         -- the paper's figure, NULL where it gives none
	PRIMARY KEY (run, name)
);
CREATE INDEX figures_by_name ON figures (name);
CREATE TABLE samples (
	run  TEXT NOT NULL,
	name TEXT NOT NULL,
	vals BLOB NOT NULL,                 -- little-endian float64s
	PRIMARY KEY (run, name)
);
`,
}
