// refdns: a small DNS server in the shape of the Go servers soak is written for
// (a local zone, a block list, an answer cache, forwarding, a SQLite query log
// behind a bounded queue, an HTTP API with /metrics). It is the project's
// reference target: `make demo` soaks it and the tests read its real Go runtime.
//
// Built in GOPATH mode from Debian's Go packages: scripts/build-refdns.sh.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/miekg/dns"
)

type options struct {
	dnsAddr         string
	apiAddr         string
	dataDir         string
	zoneFile        string
	blocklist       string
	upstream        string
	cacheEntries    int
	queueLen        int
	batchRows       int
	fsync           bool
	slowDisk        time.Duration
	mmapBytes       int64
	maxRows         int
	maxBytes        int64
	trimInterval    time.Duration
	format          int
	migrate         bool
	leak            bool
	upstreamTimeout time.Duration
	shape           shapeOptions
}

func parseFlags(args []string) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("refdns", flag.ContinueOnError)
	fs.StringVar(&o.dnsAddr, "dns", "127.0.0.1:5353", "DNS listen address (UDP and TCP)")
	fs.StringVar(&o.apiAddr, "api", "127.0.0.1:8080", "HTTP API listen address")
	fs.StringVar(&o.dataDir, "data", "/var/lib/refdns", "data directory (query log, state)")
	fs.StringVar(&o.zoneFile, "zone", "", "zone file (RFC 1035); empty: the built-in home.arpa zone")
	fs.StringVar(&o.blocklist, "blocklist", "", "block list: a file or an http:// URL (hosts or one name a line); empty: the built-in starter list")
	fs.StringVar(&o.upstream, "upstream", "", "upstream resolver host:port; empty: names not answered here get REFUSED")
	fs.DurationVar(&o.upstreamTimeout, "upstream-timeout", 2*time.Second, "upstream query timeout")
	fs.IntVar(&o.cacheEntries, "cache-entries", 10000, "answer cache capacity (entries)")
	fs.IntVar(&o.queueLen, "querylog-queue", 4096, "query-log queue length; a full queue sheds events")
	fs.IntVar(&o.batchRows, "querylog-batch", 512, "rows per query-log transaction (at most)")
	fs.BoolVar(&o.fsync, "querylog-fsync", false, "synchronous=FULL: every query-log commit waits for the disk")
	fs.DurationVar(&o.slowDisk, "querylog-slow-disk", 0, "sleep this long per query-log transaction: a slow disk, for tests of shedding")
	fs.Int64Var(&o.mmapBytes, "querylog-mmap-bytes", 0, "PRAGMA mmap_size of the query log: reads map the file (file-backed RSS)")
	fs.IntVar(&o.maxRows, "querylog-max-rows", 1000000, "query-log row cap; trimmed to 90% above it")
	fs.Int64Var(&o.maxBytes, "querylog-max-bytes", 256<<20, "query-log database size cap; trimmed above it")
	fs.DurationVar(&o.trimInterval, "querylog-trim-interval", 10*time.Second, "how often the caps are checked")
	fs.IntVar(&o.format, "format", 2, "on-disk format to write: 2 (current) or 1 (the old release)")
	fs.BoolVar(&o.migrate, "migrate", true, "migrate a format-1 data directory at start (false: the bug upgrade tests must catch)")
	fs.BoolVar(&o.leak, "leak", false, "leak on purpose: a parked goroutine holding 16 KiB per unique forwarded name")
	fs.StringVar(&o.shape.name, "shape", "", "a resource shape on purpose (shapes.go): startup, settle, leak, goroutines, fds, sawtooth, batch")
	fs.IntVar(&o.shape.mib, "shape-mib", 64, "MiB of a startup, settle, sawtooth or batch shape")
	fs.Float64Var(&o.shape.kibPerS, "shape-kib-per-s", 64, "KiB/s held (leak) or made garbage (sawtooth)")
	fs.Float64Var(&o.shape.perS, "shape-per-s", 1, "goroutines or fds a second (goroutines, fds)")
	fs.DurationVar(&o.shape.onset, "shape-onset", 0, "when a leak shape starts, from the server's start")
	fs.DurationVar(&o.shape.hold, "shape-for", 60*time.Second, "how long start-up growth lasts, a settle shape's time constant, or how long a batch is held")
	fs.DurationVar(&o.shape.every, "shape-every", 60*time.Second, "a batch's period")
	fs.DurationVar(&o.shape.stepTime, "shape-step", 100*time.Millisecond, "how often a shape moves")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if o.format != 1 && o.format != 2 {
		return nil, fmt.Errorf("-format must be 1 or 2, not %d", o.format)
	}
	if o.cacheEntries < 1 || o.queueLen < 1 || o.batchRows < 1 {
		return nil, fmt.Errorf("-cache-entries, -querylog-queue and -querylog-batch must be positive")
	}
	if o.shape.stepTime <= 0 {
		return nil, fmt.Errorf("-shape-step must be positive")
	}
	if err := o.shape.validate(); err != nil {
		return nil, err
	}
	return o, nil
}

func main() {
	log.SetFlags(log.LstdFlags | log.LUTC)
	opts, err := parseFlags(os.Args[1:])
	if err != nil {
		if err == flag.ErrHelp {
			os.Exit(0)
		}
		fmt.Fprintf(os.Stderr, "refdns: %v\n", err)
		os.Exit(2)
	}
	if err := run(opts); err != nil {
		fmt.Fprintf(os.Stderr, "refdns: %v\n", err)
		os.Exit(2)
	}
}

func run(o *options) error {
	store, err := openStore(o.dataDir, o.format, o.migrate)
	if err != nil {
		return err
	}
	defer store.close()
	token, err := store.apiToken(os.Getenv("REFDNS_TOKEN"))
	if err != nil {
		return err
	}
	m := newMetrics()
	qlog := newQueryLog(store, o, m)
	srv, err := newServer(o, store, qlog, m)
	if err != nil {
		return err
	}
	udp := &dns.Server{Addr: o.dnsAddr, Net: "udp", Handler: srv}
	tcp := &dns.Server{Addr: o.dnsAddr, Net: "tcp", Handler: srv}
	errc := make(chan error, 3)
	go func() { errc <- udp.ListenAndServe() }()
	go func() { errc <- tcp.ListenAndServe() }()
	api := &http.Server{Addr: o.apiAddr, Handler: newAPI(srv, store, qlog, m, token), ReadHeaderTimeout: 5 * time.Second}
	go func() { errc <- api.ListenAndServe() }()
	qlog.start()
	startShape(o.shape)
	go srv.loadBlocklist()
	log.Printf("refdns: format %d, dns %s, api %s, data %s, upstream %q, leak %v",
		o.format, o.dnsAddr, o.apiAddr, o.dataDir, o.upstream, o.leak)

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	select {
	case s := <-sig:
		log.Printf("refdns: %v, stopping", s)
	case err := <-errc:
		return fmt.Errorf("listener: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_ = api.Shutdown(ctx)
	_ = udp.ShutdownContext(ctx)
	_ = tcp.ShutdownContext(ctx)
	qlog.stop()
	return nil
}
