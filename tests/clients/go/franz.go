package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// franz is franz-go: the newest version of every API, an idempotent producer (its default).
type franz struct{}

func franzClient(bootstrap string, opts ...kgo.Opt) *kgo.Client {
	opts = append(opts, kgo.SeedBrokers(strings.Split(bootstrap, ",")...), kgo.ClientID("franz-go-suite"))
	if debug() {
		opts = append(opts, kgo.WithLogger(kgo.BasicLogger(os.Stderr, kgo.LogLevelDebug, nil)))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		die("franz-go client: %v", err)
	}
	return cl
}

func (franz) create(bootstrap, topic string, partitions int32) error {
	cl := franzClient(bootstrap)
	defer cl.Close()
	ctx, cancel := withDeadline()
	defer cancel()
	resps, err := kadm.NewClient(cl).CreateTopics(ctx, partitions, 1, nil, topic)
	if err != nil {
		return err
	}
	return resps.Error()
}

func franzCodec(codec string) (kgo.CompressionCodec, error) {
	switch codec {
	case "none":
		return kgo.NoCompression(), nil
	case "gzip":
		return kgo.GzipCompression(), nil
	case "snappy":
		return kgo.SnappyCompression(), nil
	case "lz4":
		return kgo.Lz4Compression(), nil
	case "zstd":
		return kgo.ZstdCompression(), nil
	}
	return kgo.NoCompression(), fmt.Errorf("unknown codec %q", codec)
}

func (franz) produce(bootstrap, topic, codec string, recs []kv) ([][2]int64, error) {
	c, err := franzCodec(codec)
	if err != nil {
		return nil, err
	}
	cl := franzClient(bootstrap,
		kgo.DefaultProduceTopic(topic),
		kgo.ProducerBatchCompression(c),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(5*time.Millisecond))
	defer cl.Close()
	ctx, cancel := withDeadline()
	defer cancel()
	acks := make([][2]int64, len(recs))
	errs := make([]error, len(recs))
	for i, r := range recs {
		cl.Produce(ctx, &kgo.Record{Key: r.key, Value: r.value}, func(r *kgo.Record, err error) {
			acks[i] = [2]int64{int64(r.Partition), r.Offset}
			errs[i] = err
		})
	}
	if err := cl.Flush(ctx); err != nil {
		return nil, err
	}
	for i, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("record %d: %w", i, err)
		}
	}
	return acks, nil
}

func toGot(r *kgo.Record) got {
	return got{Partition: r.Partition, Offset: r.Offset, Key: hexed(r.Key), Value: hexed(r.Value)}
}

// poll reads until count records arrived (or the deadline passed, or the context ended).
func poll(ctx context.Context, cl *kgo.Client, count int, limit time.Duration) ([]got, error) {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	var out []got
	for len(out) < count {
		fs := cl.PollFetches(ctx)
		for _, e := range fs.Errors() {
			if errors.Is(e.Err, context.DeadlineExceeded) || errors.Is(e.Err, context.Canceled) {
				return out, nil
			}
			return out, fmt.Errorf("fetching %s/%d: %w", e.Topic, e.Partition, e.Err)
		}
		fs.EachRecord(func(r *kgo.Record) { out = append(out, toGot(r)) })
		if ctx.Err() != nil {
			break
		}
	}
	return out, nil
}

func (franz) assigned(bootstrap, topic string, count int, from *[2]int64) ([]got, error) {
	opt := kgo.ConsumeTopics(topic)
	if from != nil {
		opt = kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
			topic: {int32(from[0]): kgo.NewOffset().At(from[1])},
		})
	}
	cl := franzClient(bootstrap, opt, kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	defer cl.Close()
	out, err := poll(context.Background(), cl, count, deadline)
	if err != nil {
		return out, err
	}
	// A short extra poll: anything more is a duplicate the Rust test reports.
	more, err := poll(context.Background(), cl, 1<<30, 300*time.Millisecond)
	return append(out, more...), err
}

func (franz) group(bootstrap, topic, group string, count int) ([]got, map[int32]int64, error) {
	cl := franzClient(bootstrap,
		kgo.ConsumeTopics(topic),
		kgo.ConsumerGroup(group),
		kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.SessionTimeout(10*time.Second),
		kgo.HeartbeatInterval(time.Second))
	defer cl.Close()
	ctx, cancel := withDeadline()
	defer cancel()
	// Records are kept as franz-go returned them, to commit exactly the ones taken.
	var taken []*kgo.Record
	for len(taken) < count && ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		for _, e := range fs.Errors() {
			if !errors.Is(e.Err, context.DeadlineExceeded) {
				return nil, nil, fmt.Errorf("fetching %s/%d: %w", e.Topic, e.Partition, e.Err)
			}
		}
		fs.EachRecord(func(r *kgo.Record) { taken = append(taken, r) })
	}
	if len(taken) < count {
		return nil, nil, fmt.Errorf("read %d of %d records in %v", len(taken), count, deadline)
	}
	// Commit what was taken (records fetched past it stay unread), then leave.
	taken = taken[:count]
	if err := cl.CommitRecords(ctx, taken...); err != nil {
		return nil, nil, fmt.Errorf("committing: %w", err)
	}
	if err := cl.LeaveGroupContext(ctx); err != nil {
		return nil, nil, fmt.Errorf("leaving: %w", err)
	}
	out := make([]got, len(taken))
	for i, r := range taken {
		out[i] = toGot(r)
	}
	return out, committedAfter(out), nil
}
