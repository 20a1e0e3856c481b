// kafkajs against odradek's Kafka listener, for tests/kafka_clients: one command a run,
// its request as JSON on stdin, its answer as one JSON line on stdout.
//   node client.js produce HOST:PORT  {topic, partition, acks, codec, messages: [[key, value]]}
//   node client.js read HOST:PORT     {topic, partition, offset, count}
//   node client.js group HOST:PORT    {topic, group, count, commit}: the offsets of the first
//                                     count messages a member is given, and commit after them
//   node client.js member HOST:PORT   {topic, group}: a group member printing each message
//                                     it processed, committed, as {"p":..,"o":..,"v":..}
"use strict";
const { Kafka, CompressionTypes, logLevel } = require("kafkajs");

const [command, broker] = process.argv.slice(2);
const kafka = new Kafka({ brokers: [broker], clientId: "kafkajs-test", logLevel: logLevel.ERROR,
                          retry: { retries: 20, initialRetryTime: 100 } });
const CODECS = { none: CompressionTypes.None, gzip: CompressionTypes.GZIP };

function stdin() {
  return new Promise((resolve) => {
    let text = "";
    process.stdin.on("data", (chunk) => { text += chunk; });
    process.stdin.on("end", () => resolve(text ? JSON.parse(text) : {}));
  });
}

async function produce(request) {
  const producer = kafka.producer();
  await producer.connect();
  const result = await producer.send({
    topic: request.topic, acks: request.acks, compression: CODECS[request.codec],
    messages: request.messages.map(([key, value]) => ({ key, value, partition: request.partition })),
  });
  await producer.disconnect();
  return { result };
}

async function read(request) {
  const consumer = kafka.consumer({ groupId: `kafkajs-reader-${process.pid}-${Date.now()}` });
  await consumer.connect();
  await consumer.subscribe({ topic: request.topic, fromBeginning: true });
  const messages = [];
  await new Promise((resolve) => {
    consumer.run({
      eachMessage: async ({ partition, message }) => {
        if (partition !== request.partition || Number(message.offset) < request.offset) return;
        if (messages.length < request.count) {
          messages.push([message.key === null ? null : message.key.toString(),
                         message.value.toString()]);
        }
        if (messages.length >= request.count) resolve();
      },
    });
  });
  await consumer.disconnect();
  return { messages };
}

async function group(request) {
  const consumer = kafka.consumer({ groupId: request.group });
  await consumer.connect();
  await consumer.subscribe({ topic: request.topic, fromBeginning: true });
  const offsets = [];
  await new Promise((resolve) => {
    consumer.run({
      autoCommit: false,
      eachMessage: async ({ topic, partition, message }) => {
        if (offsets.length >= request.count) return;
        offsets.push(Number(message.offset));
        if (offsets.length === request.count) {
          if (request.commit) {
            const next = (Number(message.offset) + 1).toString();
            await consumer.commitOffsets([{ topic, partition, offset: next }]);
          }
          resolve();
        }
      },
    });
  });
  await consumer.disconnect();
  return { offsets };
}

async function member(request) {
  const consumer = kafka.consumer({ groupId: request.group, sessionTimeout: 6000,
                                    heartbeatInterval: 500 });
  await consumer.connect();
  await consumer.subscribe({ topic: request.topic, fromBeginning: true });
  await consumer.run({
    autoCommit: false,
    eachMessage: async ({ topic, partition, message }) => {
      const next = (Number(message.offset) + 1).toString();
      await consumer.commitOffsets([{ topic, partition, offset: next }]);
      process.stdout.write(JSON.stringify({ p: partition, o: Number(message.offset),
                                            v: message.value.toString() }) + "\n");
    },
  });
  const stop = async () => { await consumer.disconnect(); process.exit(0); };
  process.on("SIGTERM", stop);
  return null;
}

(async () => {
  const request = await stdin();
  const answer = await { produce, read, group, member }[command](request);
  if (answer !== null) {
    process.stdout.write(JSON.stringify(answer) + "\n");
  }
})().catch((error) => {
  process.stderr.write(`${error.stack || error}\n`);
  process.exit(1);
});
