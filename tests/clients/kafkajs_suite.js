// kafkajs's side of tests/interop_clients/clients.rs: one command per run, records as JSON
// lines.
//
// Keys and values travel as hex strings (null for a null value), so the Rust test compares
// bytes exactly. Every command prints JSON lines on stdout and exits non-zero, with the
// reason on stderr, when it cannot finish in its time.
//
//   create   BOOTSTRAP TOPIC PARTITIONS
//   produce  BOOTSTRAP TOPIC CODEC        stdin {"key","value"} -> stdout {"partition","offset"}
//   assigned BOOTSTRAP TOPIC COUNT [P:OFFSET]
//                                         read COUNT records of every partition from the
//                                         beginning, or of partition P only from OFFSET
//   group    BOOTSTRAP TOPIC GROUP COUNT  read exactly COUNT records in the group, commit the
//                                         offsets after them, leave; then a {"committed"} line
//
// kafkajs has no group-less consumer: `assigned` joins a throwaway group whose assigner
// hands the one member every partition of the topic, or only partition P (as assign()
// would), never commits, and starts from the beginning (or seeks partition P to OFFSET).
//
// Codecs: kafkajs itself has only gzip; snappy comes from the kafkajs-snappy codec package.

'use strict'

let kafkajs, SnappyCodec
try {
  kafkajs = require('kafkajs')
  SnappyCodec = require('kafkajs-snappy')
} catch (e) {
  console.error(`kafkajs is not installed (${e.message}): run .ci/run, or npm ci in tests/clients`)
  process.exit(2)
}
const { Kafka, CompressionTypes, CompressionCodecs, Partitioners, AssignerProtocol, logLevel } = kafkajs
CompressionCodecs[CompressionTypes.Snappy] = SnappyCodec

const VERSION = require('kafkajs/package.json').version
// Upper bound for one command; the Rust test has its own, longer one.
const DEADLINE_MS = 40000

const CONSUMER_TIMING = {
  // The broker's group.min.session.timeout.ms is 6000.
  sessionTimeout: 10000,
  heartbeatInterval: 1000,
  // disconnect() waits for the fetch in flight, which the broker holds this long when
  // there is nothing new (kafkajs's default is 5 s).
  maxWaitTimeInMs: 500,
}

const CODECS = {
  none: CompressionTypes.None,
  gzip: CompressionTypes.GZIP,
  snappy: CompressionTypes.Snappy,
}

function client(bootstrap) {
  return new Kafka({
    clientId: 'kafkajs-suite',
    // A bootstrap list is comma-separated, as the other clients take it.
    brokers: bootstrap.split(','),
    logLevel: process.env.KAFKAJS_DEBUG ? logLevel.DEBUG : logLevel.WARN,
    // kafkajs logs to stdout by default; stdout carries the results.
    logCreator: () => ({ namespace, label, log }) => {
      const { message, ...rest } = log
      process.stderr.write(`${label} [${namespace}] ${message} ${JSON.stringify(rest)}\n`)
    },
    retry: { retries: 3 },
  })
}

function emit(obj) {
  process.stdout.write(JSON.stringify(obj) + '\n')
}

function fail(why) {
  process.stderr.write(`kafkajs ${VERSION}: ${why}\n`)
  process.exit(1)
}

const hexed = b => (b === null ? null : b.toString('hex'))

function record(topicPartition, message) {
  return {
    partition: topicPartition,
    offset: Number(message.offset),
    key: hexed(message.key),
    value: hexed(message.value),
  }
}

async function readStdin() {
  const chunks = []
  for await (const chunk of process.stdin) chunks.push(chunk)
  return Buffer.concat(chunks)
    .toString('utf8')
    .split('\n')
    .filter(l => l.length > 0)
    .map(l => JSON.parse(l))
}

async function create(bootstrap, topic, partitions) {
  const admin = client(bootstrap).admin()
  await admin.connect()
  const created = await admin.createTopics({
    topics: [{ topic, numPartitions: Number(partitions), replicationFactor: 1 }],
    waitForLeaders: true,
    timeout: 30000,
  })
  if (!created) fail(`createTopics says ${topic} already existed`)
  await admin.disconnect()
}

async function produce(bootstrap, topic, codec) {
  if (!(codec in CODECS)) fail(`no codec ${codec} here (have: ${Object.keys(CODECS)})`)
  const input = await readStdin()
  // The default (Java-compatible murmur2) partitioner picks each record's partition; note
  // its choice, since a send's answer gives one base offset per partition.
  const chosen = new Map()
  const recording = () => {
    const inner = Partitioners.DefaultPartitioner()
    return args => {
      const p = inner(args)
      chosen.set(args.message, p)
      return p
    }
  }
  const producer = client(bootstrap).producer({ createPartitioner: recording, retry: { retries: 0 } })
  await producer.connect()
  const messages = input.map(r => ({
    key: Buffer.from(r.key, 'hex'),
    value: r.value === null ? null : Buffer.from(r.value, 'hex'),
  }))
  // One send: one batch per partition, its records in input order from the base offset.
  const answers = await producer.send({ topic, messages, acks: -1, compression: CODECS[codec] })
  const base = new Map(answers.map(a => [a.partition, BigInt(a.baseOffset)]))
  const next = new Map()
  for (const m of messages) {
    const p = chosen.get(m)
    if (!base.has(p)) fail(`no answer for partition ${p} in ${JSON.stringify(answers)}`)
    const i = next.get(p) || 0n
    next.set(p, i + 1n)
    emit({ partition: p, offset: Number(base.get(p) + i) })
  }
  await producer.disconnect()
}

// The chosen partitions (all when `only` is undefined) to the one member, as a group-less
// assign() would.
const explicitAssigner = only => ({ cluster }) => ({
  name: 'ExplicitPartitions',
  version: 0,
  async assign({ members, topics }) {
    const assignment = {}
    for (const topic of topics) {
      assignment[topic] = cluster
        .findTopicPartitionMetadata(topic)
        .map(m => m.partitionId)
        .filter(p => only === undefined || p === only)
    }
    const sorted = members.map(m => m.memberId).sort()
    return sorted.map((memberId, i) => ({
      memberId,
      memberAssignment: AssignerProtocol.MemberAssignment.encode({
        version: 0,
        assignment: i === 0 ? assignment : {},
      }),
    }))
  },
  protocol({ topics }) {
    return { name: this.name, metadata: AssignerProtocol.MemberMetadata.encode({ version: 0, topics }) }
  },
})

// Runs a consumer until it has `want` records; with `keepReading` it goes on collecting
// (for the caller's grace period) rather than ignoring what comes after them.
async function consume(consumer, topic, want, { keepReading = false, afterRun = () => {} } = {}) {
  const got = []
  let finish
  const done = new Promise(resolve => (finish = resolve))
  const timer = setTimeout(() => finish('timeout'), DEADLINE_MS)
  consumer.on(consumer.events.CRASH, e => {
    process.stderr.write(`kafkajs consumer crashed: ${e.payload.error && e.payload.error.stack}\n`)
    finish('crash')
  })
  await consumer.connect()
  await consumer.subscribe({ topics: [topic], fromBeginning: true })
  await consumer.run({
    autoCommit: false,
    eachMessage: async ({ partition, message }) => {
      if (got.length < want || keepReading) got.push(record(partition, message))
      if (got.length >= want) finish('enough')
    },
  })
  afterRun()
  const why = await done
  clearTimeout(timer)
  return { got, why }
}

async function assigned(bootstrap, topic, count, start) {
  const consumer = client(bootstrap).consumer({
    groupId: `kafkajs-suite-assigned-${process.pid}-${Date.now()}`,
    partitionAssigners: [explicitAssigner(start ? Number(start.split(':')[0]) : undefined)],
    ...CONSUMER_TIMING,
  })
  const want = Number(count)
  const seek = () => {
    if (start) {
      const [p, offset] = start.split(':')
      consumer.seek({ topic, partition: Number(p), offset })
    }
  }
  const { got, why } = await consume(consumer, topic, want, { keepReading: true, afterRun: seek })
  // Keep reading a moment past `want`: anything more is a duplicate the Rust test reports.
  if (why === 'enough') await new Promise(r => setTimeout(r, 300))
  const read = got.slice()
  await consumer.disconnect()
  read.forEach(emit)
  if (read.length < want) fail(`read ${read.length} of ${want} records of ${topic} (${why})`)
}

async function group(bootstrap, topic, groupId, count) {
  const consumer = client(bootstrap).consumer({ groupId, ...CONSUMER_TIMING })
  const want = Number(count)
  const { got, why } = await consume(consumer, topic, want)
  got.forEach(emit)
  if (got.length < want) {
    await consumer.disconnect()
    fail(`read ${got.length} of ${want} records of ${topic} in group ${groupId} (${why})`)
  }
  // Commit what was taken (records fetched past it stay unread), then leave.
  const last = new Map()
  for (const r of got) last.set(r.partition, r.offset + 1)
  const commits = [...last].map(([partition, offset]) => ({ topic, partition, offset: String(offset) }))
  await consumer.commitOffsets(commits)
  await consumer.disconnect()
  emit({ committed: Object.fromEntries([...last].sort((a, b) => a[0] - b[0])) })
}

async function main() {
  const [command, ...args] = process.argv.slice(2)
  const commands = { create, produce, assigned, group }
  if (!commands[command]) fail(`usage: kafkajs_suite.js create|produce|assigned|group BOOTSTRAP ...`)
  await commands[command](...args)
}

main().catch(e => fail(e.stack || String(e)))
