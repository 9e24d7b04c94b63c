package main

import (
	"fmt"
	"log"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/IBM/sarama"
)

// saramaClient is sarama set to Kafka 2.1's protocol: older versions of most APIs than the
// other clients use, and a producer that is not idempotent.
type saramaClient struct{}

func saramaConfig() *sarama.Config {
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V2_1_0_0
	cfg.ClientID = "sarama-suite"
	cfg.Metadata.Retry.Backoff = 100 * time.Millisecond
	if debug() {
		sarama.Logger = log.New(os.Stderr, "[sarama] ", log.Lmicroseconds)
		sarama.DebugLogger = sarama.Logger
	}
	return cfg
}

func (saramaClient) create(bootstrap, topic string, partitions int32) error {
	admin, err := sarama.NewClusterAdmin(strings.Split(bootstrap, ","), saramaConfig())
	if err != nil {
		return err
	}
	defer admin.Close()
	return admin.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: partitions, ReplicationFactor: 1}, false)
}

func saramaCodec(codec string) (sarama.CompressionCodec, error) {
	switch codec {
	case "none":
		return sarama.CompressionNone, nil
	case "gzip":
		return sarama.CompressionGZIP, nil
	case "snappy":
		return sarama.CompressionSnappy, nil
	case "lz4":
		return sarama.CompressionLZ4, nil
	case "zstd":
		return sarama.CompressionZSTD, nil
	}
	return sarama.CompressionNone, fmt.Errorf("unknown codec %q", codec)
}

func (saramaClient) produce(bootstrap, topic, codec string, recs []kv) ([][2]int64, error) {
	cfg := saramaConfig()
	c, err := saramaCodec(codec)
	if err != nil {
		return nil, err
	}
	cfg.Producer.Compression = c
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Return.Successes = true
	cfg.Producer.Flush.Frequency = 5 * time.Millisecond
	p, err := sarama.NewAsyncProducer(strings.Split(bootstrap, ","), cfg)
	if err != nil {
		return nil, err
	}
	defer p.Close()
	go func() {
		for i, r := range recs {
			m := &sarama.ProducerMessage{Topic: topic, Key: sarama.ByteEncoder(r.key), Metadata: i}
			if r.value != nil {
				m.Value = sarama.ByteEncoder(r.value)
			}
			p.Input() <- m
		}
	}()
	acks := make([][2]int64, len(recs))
	timeout := time.After(deadline)
	for n := 0; n < len(recs); n++ {
		select {
		case m := <-p.Successes():
			acks[m.Metadata.(int)] = [2]int64{int64(m.Partition), m.Offset}
		case e := <-p.Errors():
			return nil, fmt.Errorf("record %v: %w", e.Msg.Metadata, e.Err)
		case <-timeout:
			return nil, fmt.Errorf("%d of %d records acknowledged in %v", n, len(recs), deadline)
		}
	}
	return acks, nil
}

func fromSarama(m *sarama.ConsumerMessage) got {
	return got{Partition: m.Partition, Offset: m.Offset, Key: hexed(m.Key), Value: hexed(m.Value)}
}

func (saramaClient) assigned(bootstrap, topic string, count int, from *[2]int64) ([]got, error) {
	consumer, err := sarama.NewConsumer(strings.Split(bootstrap, ","), saramaConfig())
	if err != nil {
		return nil, err
	}
	defer consumer.Close()
	starts := map[int32]int64{}
	if from != nil {
		starts[int32(from[0])] = from[1]
	} else {
		parts, err := consumer.Partitions(topic)
		if err != nil {
			return nil, err
		}
		for _, p := range parts {
			starts[p] = sarama.OffsetOldest
		}
	}
	msgs := make(chan *sarama.ConsumerMessage)
	errs := make(chan error, len(starts))
	for p, offset := range starts {
		pc, err := consumer.ConsumePartition(topic, p, offset)
		if err != nil {
			return nil, fmt.Errorf("partition %d at %d: %w", p, offset, err)
		}
		defer pc.Close()
		go func() {
			for m := range pc.Messages() {
				msgs <- m
			}
		}()
		go func() {
			for e := range pc.Errors() {
				errs <- e
			}
		}()
	}
	var out []got
	timeout := time.After(deadline)
	var extra <-chan time.Time
	for {
		if len(out) >= count && extra == nil {
			// A short extra wait: anything more is a duplicate the Rust test reports.
			extra = time.After(300 * time.Millisecond)
		}
		select {
		case m := <-msgs:
			out = append(out, fromSarama(m))
		case e := <-errs:
			return out, e
		case <-timeout:
			return out, nil
		case <-extra:
			return out, nil
		}
	}
}

// taker keeps the first count records the group's claims deliver, marks each, and commits
// once it has them all.
type taker struct {
	count int
	mu    sync.Mutex
	taken []got
	done  chan struct{}
	err   error
}

func (t *taker) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (t *taker) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (t *taker) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for {
		select {
		case m, ok := <-claim.Messages():
			if !ok {
				return nil
			}
			t.mu.Lock()
			if len(t.taken) < t.count {
				t.taken = append(t.taken, fromSarama(m))
				sess.MarkMessage(m, "")
				if len(t.taken) == t.count {
					// Commit what was taken (records fetched past it stay unread).
					sess.Commit()
					close(t.done)
				}
			}
			t.mu.Unlock()
		case <-sess.Context().Done():
			return nil
		}
	}
}

func (saramaClient) group(bootstrap, topic, group string, count int) ([]got, map[int32]int64, error) {
	cfg := saramaConfig()
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Offsets.AutoCommit.Enable = false
	cfg.Consumer.Group.Session.Timeout = 10 * time.Second
	cfg.Consumer.Group.Heartbeat.Interval = time.Second
	cfg.Consumer.Return.Errors = true
	cg, err := sarama.NewConsumerGroup(strings.Split(bootstrap, ","), group, cfg)
	if err != nil {
		return nil, nil, err
	}
	t := &taker{count: count, done: make(chan struct{})}
	ctx, cancel := withDeadline()
	consumed := make(chan error, 1)
	go func() {
		for ctx.Err() == nil {
			if err := cg.Consume(ctx, []string{topic}, t); err != nil && ctx.Err() == nil {
				consumed <- err
				return
			}
		}
		consumed <- nil
	}()
	go func() {
		for e := range cg.Errors() {
			fmt.Fprintf(os.Stderr, "sarama group error: %v\n", e)
		}
	}()
	var failed error
	select {
	case <-t.done:
	case err := <-consumed:
		failed = fmt.Errorf("consuming: %v", err)
	case <-ctx.Done():
		failed = fmt.Errorf("read %d of %d records in %v", len(t.taken), count, deadline)
	}
	cancel()
	// Close leaves the group.
	if err := cg.Close(); err != nil && failed == nil {
		failed = fmt.Errorf("closing: %w", err)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if failed != nil {
		return nil, nil, failed
	}
	return t.taken, committedAfter(t.taken), nil
}
