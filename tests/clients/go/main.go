// The Go clients' side of tests/interop_clients/clients.rs: franz-go (which negotiates the
// newest version of every API both sides know) and sarama (set to speak as to Kafka 2.1,
// the oldest release Kafka 4 still serves, so it uses older versions of most APIs: Produce
// v7, Fetch v10, Metadata v7, JoinGroup v3, OffsetCommit v6 among them). One command per
// run, records as JSON lines, the same commands as kafka_python_suite.py:
//
//	goclients LIB create   BOOTSTRAP TOPIC PARTITIONS
//	goclients LIB produce  BOOTSTRAP TOPIC CODEC        stdin {"key","value"} -> stdout {"partition","offset"}
//	goclients LIB assigned BOOTSTRAP TOPIC COUNT [P:OFFSET]
//	goclients LIB group    BOOTSTRAP TOPIC GROUP COUNT  then a {"committed"} line
//
// LIB is franz or sarama. Keys and values travel as hex (null for a null value). A command
// that cannot finish within its deadline exits non-zero with the reason on stderr.
// GOCLIENTS_DEBUG=1 logs each client's requests on stderr.
package main

import (
	"bufio"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Upper bound for one command; the Rust test has its own, longer one.
const deadline = 40 * time.Second

// A record read, as the Rust test parses it.
type got struct {
	Partition int32   `json:"partition"`
	Offset    int64   `json:"offset"`
	Key       *string `json:"key"`
	Value     *string `json:"value"`
}

// A record to produce, as the Rust test writes it.
type rec struct {
	Key   string  `json:"key"`
	Value *string `json:"value"`
}

// What each library does for the four commands.
type client interface {
	create(bootstrap, topic string, partitions int32) error
	// produce sends recs in order; it returns each one's (partition, offset).
	produce(bootstrap, topic, codec string, recs []kv) ([][2]int64, error)
	// assigned reads at least count records without a group (and whatever else arrives
	// shortly after: a duplicate is the test's to find).
	assigned(bootstrap, topic string, count int, from *[2]int64) ([]got, error)
	// group reads exactly count records in the group, commits the offsets after them and
	// leaves; it returns what it read and what it committed.
	group(bootstrap, topic, group string, count int) ([]got, map[int32]int64, error)
}

type kv struct {
	key   []byte
	value []byte // nil: a null value
}

func hexed(b []byte) *string {
	if b == nil {
		return nil
	}
	s := hex.EncodeToString(b)
	return &s
}

func emit(v any) {
	line, err := json.Marshal(v)
	if err != nil {
		die("encoding %v: %v", v, err)
	}
	os.Stdout.Write(append(line, '\n'))
}

func die(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "goclients: "+format+"\n", args...)
	os.Exit(1)
}

func debug() bool { return os.Getenv("GOCLIENTS_DEBUG") != "" }

func readInput() []kv {
	var out []kv
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var r rec
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			die("input line %q: %v", sc.Text(), err)
		}
		key, err := hex.DecodeString(r.Key)
		if err != nil {
			die("key %q: %v", r.Key, err)
		}
		one := kv{key: key}
		if r.Value != nil {
			v, err := hex.DecodeString(*r.Value)
			if err != nil {
				die("value %q: %v", *r.Value, err)
			}
			one.value = append([]byte{}, v...) // an empty value stays non-nil: not null
		}
		out = append(out, one)
	}
	if err := sc.Err(); err != nil {
		die("reading stdin: %v", err)
	}
	return out
}

// committedAfter is, for each partition of taken, the offset after its last record.
func committedAfter(taken []got) map[int32]int64 {
	next := map[int32]int64{}
	for _, g := range taken {
		if g.Offset+1 > next[g.Partition] {
			next[g.Partition] = g.Offset + 1
		}
	}
	return next
}

func emitCommitted(c map[int32]int64) {
	parts := make([]int, 0, len(c))
	for p := range c {
		parts = append(parts, int(p))
	}
	sort.Ints(parts)
	m := map[string]int64{}
	for _, p := range parts {
		m[strconv.Itoa(p)] = c[int32(p)]
	}
	emit(map[string]any{"committed": m})
}

func main() {
	if len(os.Args) < 5 {
		die("usage: goclients franz|sarama create|produce|assigned|group BOOTSTRAP TOPIC ...")
	}
	var c client
	switch os.Args[1] {
	case "franz":
		c = franz{}
	case "sarama":
		c = saramaClient{}
	default:
		die("unknown library %q: franz or sarama", os.Args[1])
	}
	cmd, bootstrap, topic, rest := os.Args[2], os.Args[3], os.Args[4], os.Args[5:]
	num := func(i int) int64 {
		if len(rest) <= i {
			die("%s: missing argument %d", cmd, i+1)
		}
		n, err := strconv.ParseInt(rest[i], 10, 64)
		if err != nil {
			die("%s: argument %q: %v", cmd, rest[i], err)
		}
		return n
	}
	switch cmd {
	case "create":
		if err := c.create(bootstrap, topic, int32(num(0))); err != nil {
			die("creating %s: %v", topic, err)
		}
	case "produce":
		if len(rest) != 1 {
			die("produce: CODEC expected")
		}
		acks, err := c.produce(bootstrap, topic, rest[0], readInput())
		if err != nil {
			die("producing with %s: %v", rest[0], err)
		}
		for _, a := range acks {
			emit(map[string]int64{"partition": a[0], "offset": a[1]})
		}
	case "assigned":
		var from *[2]int64
		if len(rest) > 1 {
			p, o, ok := strings.Cut(rest[1], ":")
			pn, err1 := strconv.ParseInt(p, 10, 32)
			on, err2 := strconv.ParseInt(o, 10, 64)
			if !ok || err1 != nil || err2 != nil {
				die("assigned: %q is not PARTITION:OFFSET", rest[1])
			}
			from = &[2]int64{pn, on}
		}
		count := int(num(0))
		recs, err := c.assigned(bootstrap, topic, count, from)
		for _, r := range recs {
			emit(r)
		}
		if err != nil {
			die("reading by assignment: %v", err)
		}
		if len(recs) < count {
			die("read %d of %d records of %s by assignment in %v", len(recs), count, topic, deadline)
		}
	case "group":
		if len(rest) != 2 {
			die("group: GROUP COUNT expected")
		}
		count := int(num(1))
		recs, committed, err := c.group(bootstrap, topic, rest[0], count)
		for _, r := range recs {
			emit(r)
		}
		if err != nil {
			die("reading in group %s: %v", rest[0], err)
		}
		emitCommitted(committed)
	default:
		die("unknown command %q", cmd)
	}
}

func withDeadline() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), deadline)
}
