package main

// The DNS path: local zone, then allow list, then block list (0.0.0.0 / ::),
// then the answer cache, then the upstream.

import (
	"bufio"
	"container/list"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
)

const builtinZone = `$ORIGIN home.arpa.
@       3600 IN SOA ns.home.arpa. hostmaster.home.arpa. 1 3600 600 86400 60
@       3600 IN NS  ns.home.arpa.
ns      3600 IN A   192.168.1.1
router  3600 IN A   192.168.1.1
www     3600 IN A   192.168.1.10
nas     3600 IN A   192.168.1.20
printer 3600 IN A   192.168.1.30
www     3600 IN AAAA fd00::10
`

// The starter list: what a fresh install blocks before any list is fetched.
const builtinBlocklist = "blocked.example\nads.example\ntracker.example\n"

type zone struct {
	origin string
	soa    dns.RR
	rrs    map[string][]dns.RR // "name/TYPE" -> records
	names  map[string]bool
}

func parseZone(r io.Reader, file string) (*zone, error) {
	z := &zone{rrs: map[string][]dns.RR{}, names: map[string]bool{}}
	zp := dns.NewZoneParser(r, "", file)
	for rr, ok := zp.Next(); ok; rr, ok = zp.Next() {
		h := rr.Header()
		name := normName(h.Name)
		if soa, isSOA := rr.(*dns.SOA); isSOA {
			z.soa, z.origin = soa, name
		}
		key := name + "/" + dns.TypeToString[h.Rrtype]
		z.rrs[key] = append(z.rrs[key], rr)
		z.names[name] = true
	}
	if err := zp.Err(); err != nil {
		return nil, fmt.Errorf("zone %s: %w", file, err)
	}
	if z.soa == nil {
		return nil, fmt.Errorf("zone %s: no SOA record", file)
	}
	return z, nil
}

func (z *zone) contains(name string) bool {
	return name == z.origin || strings.HasSuffix(name, "."+z.origin)
}

type cacheEntry struct {
	key     string
	msg     *dns.Msg
	expires time.Time
}

// answerCache is a bounded LRU of upstream answers, expired by their TTL.
type answerCache struct {
	mu      sync.Mutex
	cap     int
	order   *list.List
	entries map[string]*list.Element
}

func newAnswerCache(capacity int) *answerCache {
	return &answerCache{cap: capacity, order: list.New(), entries: map[string]*list.Element{}}
}

func (c *answerCache) get(key string, now time.Time) *dns.Msg {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.entries[key]
	if !ok {
		return nil
	}
	e := el.Value.(*cacheEntry)
	if now.After(e.expires) {
		c.order.Remove(el)
		delete(c.entries, key)
		return nil
	}
	c.order.MoveToFront(el)
	return e.msg
}

// put returns how many entries were evicted to make room.
func (c *answerCache) put(key string, msg *dns.Msg, ttl time.Duration, now time.Time) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.entries[key]; ok {
		el.Value = &cacheEntry{key, msg, now.Add(ttl)}
		c.order.MoveToFront(el)
		return 0
	}
	evicted := 0
	for c.order.Len() >= c.cap {
		last := c.order.Back()
		c.order.Remove(last)
		delete(c.entries, last.Value.(*cacheEntry).key)
		evicted++
	}
	c.entries[key] = c.order.PushFront(&cacheEntry{key, msg, now.Add(ttl)})
	return evicted
}

func (c *answerCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}

type server struct {
	opts   *options
	st     *store
	qlog   *queryLog
	m      *metrics
	zone   *zone
	cache  *answerCache
	client *dns.Client
	block  atomic.Value // map[string]struct{}
	allow  atomic.Value // *allowSet
	ready  atomic.Bool
	leaked sync.Map // name -> struct{}: -leak
	leakCh chan struct{}
}

type allowSet struct {
	exact  map[string]bool
	suffix []string
}

func newServer(o *options, st *store, ql *queryLog, m *metrics) (*server, error) {
	var z *zone
	var err error
	if o.zoneFile == "" {
		z, err = parseZone(strings.NewReader(builtinZone), "builtin")
	} else {
		f, ferr := os.Open(o.zoneFile)
		if ferr != nil {
			return nil, ferr
		}
		defer f.Close()
		z, err = parseZone(f, o.zoneFile)
	}
	if err != nil {
		return nil, err
	}
	s := &server{opts: o, st: st, qlog: ql, m: m, zone: z, cache: newAnswerCache(o.cacheEntries),
		client: &dns.Client{Net: "udp", Timeout: o.upstreamTimeout}, leakCh: make(chan struct{})}
	// The starter list before the first answer: the DNS listeners start before the
	// configured list is fetched, and a blocked name must never be forwarded meanwhile.
	s.swapBlocklist(parseList(strings.NewReader(builtinBlocklist)))
	if err := s.reloadAllow(); err != nil {
		return nil, err
	}
	m.cacheEntries = s.cache.len
	return s, nil
}

func (s *server) reloadAllow() error {
	entries, err := s.st.allowEntries()
	if err != nil {
		return fmt.Errorf("allow list: %w", err)
	}
	set := &allowSet{exact: map[string]bool{}}
	for _, e := range entries {
		if e.Kind == "suffix" {
			set.suffix = append(set.suffix, e.Value)
		} else {
			set.exact[e.Value] = true
		}
	}
	s.allow.Store(set)
	s.m.allowEntries.Set(float64(len(entries)))
	return nil
}

// loadBlocklist marks the server ready (newServer put the starter list in place), then
// loads the configured list, which may be large or remote, and swaps it in.
func (s *server) loadBlocklist() {
	s.ready.Store(true)
	if s.opts.blocklist == "" {
		return
	}
	started := time.Now()
	names, err := fetchList(s.opts.blocklist)
	if err != nil {
		log.Printf("refdns: ERROR block list %s: %v", s.opts.blocklist, err)
		return
	}
	for n := range parseList(strings.NewReader(builtinBlocklist)) {
		names[n] = struct{}{}
	}
	s.swapBlocklist(names)
	log.Printf("refdns: block list %s loaded: %d names in %v", s.opts.blocklist, len(names), time.Since(started))
}

func (s *server) swapBlocklist(names map[string]struct{}) {
	s.block.Store(names)
	s.m.blocklistEntries.Set(float64(len(names)))
}

func fetchList(src string) (map[string]struct{}, error) {
	if strings.HasPrefix(src, "http://") || strings.HasPrefix(src, "https://") {
		c := &http.Client{Timeout: 60 * time.Second}
		resp, err := c.Get(src)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("status %d", resp.StatusCode)
		}
		return parseList(resp.Body), nil
	}
	f, err := os.Open(src)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return parseList(f), nil
}

// parseList reads hosts-file lines ("0.0.0.0 name") or one name a line.
func parseList(r io.Reader) map[string]struct{} {
	names := map[string]struct{}{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		name := fields[len(fields)-1]
		if n := normName(name); n != "" && n != "localhost" && net.ParseIP(n) == nil {
			names[n] = struct{}{}
		}
	}
	return names
}

// matches: the name or one of its parents is in the set.
func inSet(set map[string]struct{}, name string) bool {
	for {
		if _, ok := set[name]; ok {
			return true
		}
		i := strings.IndexByte(name, '.')
		if i < 0 {
			return false
		}
		name = name[i+1:]
	}
}

func (a *allowSet) allows(name string) bool {
	if a.exact[name] {
		return true
	}
	for _, suf := range a.suffix {
		if name == suf || strings.HasSuffix(name, "."+suf) {
			return true
		}
	}
	return false
}

func (s *server) ServeDNS(w dns.ResponseWriter, req *dns.Msg) {
	started := time.Now()
	if len(req.Question) != 1 {
		m := new(dns.Msg)
		m.SetRcode(req, dns.RcodeFormatError)
		w.WriteMsg(m) //nolint:errcheck
		return
	}
	q := req.Question[0]
	name := normName(q.Name)
	resp, action := s.answer(req, q, name, started)
	w.WriteMsg(resp) //nolint:errcheck
	s.m.queries.WithLabelValues(action).Inc()
	s.qlog.add(logEvent{at: started, name: name, qtype: q.Qtype, rcode: resp.Rcode,
		action: action, duration: time.Since(started)})
}

func (s *server) answer(req *dns.Msg, q dns.Question, name string, now time.Time) (*dns.Msg, string) {
	m := new(dns.Msg)
	m.SetReply(req)
	if s.zone.contains(name) {
		m.Authoritative = true
		rrs := s.zone.rrs[name+"/"+dns.TypeToString[q.Qtype]]
		for _, rr := range rrs {
			m.Answer = append(m.Answer, dns.Copy(rr))
		}
		if len(rrs) == 0 {
			if !s.zone.names[name] {
				m.Rcode = dns.RcodeNameError
			}
			m.Ns = []dns.RR{dns.Copy(s.zone.soa)}
		}
		return m, "local"
	}
	allowed := s.allow.Load().(*allowSet).allows(name)
	if !allowed && inSet(s.block.Load().(map[string]struct{}), name) {
		hdr := dns.RR_Header{Name: q.Name, Class: dns.ClassINET, Ttl: 60, Rrtype: q.Qtype}
		switch q.Qtype {
		case dns.TypeA:
			m.Answer = []dns.RR{&dns.A{Hdr: hdr, A: net.IPv4zero}}
		case dns.TypeAAAA:
			m.Answer = []dns.RR{&dns.AAAA{Hdr: hdr, AAAA: net.IPv6zero}}
		}
		return m, "blocked"
	}
	key := name + "/" + dns.TypeToString[q.Qtype]
	if cached := s.cache.get(key, now); cached != nil {
		out := cached.Copy()
		out.Id = req.Id
		return out, "cached"
	}
	if s.opts.upstream == "" {
		m.Rcode = dns.RcodeRefused
		return m, "refused"
	}
	return s.forward(req, key, name, now)
}

func (s *server) forward(req *dns.Msg, key, name string, now time.Time) (*dns.Msg, string) {
	up := new(dns.Msg)
	up.SetQuestion(req.Question[0].Name, req.Question[0].Qtype)
	up.RecursionDesired = true
	resp, _, err := s.client.Exchange(up, s.opts.upstream)
	if err != nil {
		s.m.upstreamErrors.Inc()
		m := new(dns.Msg)
		m.SetRcode(req, dns.RcodeServerFailure)
		return m, "servfail"
	}
	if s.opts.leak {
		s.leakName(name)
	}
	if resp.Rcode == dns.RcodeSuccess {
		ttl := minTTL(resp)
		if ttl > 0 {
			s.m.cacheEvictions.Add(float64(s.cache.put(key, resp, ttl, now)))
		}
	}
	out := resp.Copy()
	out.Id = req.Id
	out.RecursionAvailable = true
	return out, "forwarded"
}

func minTTL(m *dns.Msg) time.Duration {
	if len(m.Answer) == 0 {
		return 0
	}
	ttl := m.Answer[0].Header().Ttl
	for _, rr := range m.Answer[1:] {
		if rr.Header().Ttl < ttl {
			ttl = rr.Header().Ttl
		}
	}
	return time.Duration(ttl) * time.Second
}

// leakName is the deliberate bug of -leak: each unique forwarded name parks a
// goroutine forever, holding 16 KiB of heap it never gives back.
func (s *server) leakName(name string) {
	if _, loaded := s.leaked.LoadOrStore(name, struct{}{}); loaded {
		return
	}
	buf := make([]byte, 16<<10)
	for i := range buf {
		buf[i] = byte(i)
	}
	go func(held []byte) {
		<-s.leakCh // never closed
		runtime.KeepAlive(held)
	}(buf)
}
