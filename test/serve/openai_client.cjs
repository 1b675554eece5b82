// spark-serve driven by the official OpenAI Node client (npm `openai`, installed by
// scripts/setup.sh), as users' clients talk to it. Starts the servers it needs on free loopback
// ports, runs every check, prints "PASS <check>" per check and "openai-client: N checks passed";
// exits 1 at the first failure.
//
// usage: node openai_client.cjs SPARK_SERVE MODEL.cubin WEIGHTS TOKENIZER_DIR GOLDEN_CHAT.json
// (SPARK_SERVE_DEVICE=cuda: the servers run on the GPU; default host)
"use strict";
const { spawn } = require("child_process");
const fs = require("fs");
const OpenAI = require("openai");

const [serveBin, cubin, weights, tokenizer, goldenFile] = process.argv.slice(2);
const golden = JSON.parse(fs.readFileSync(goldenFile, "utf8"));
let passed = 0;

function check(cond, what) {
  if (!cond) throw new Error("FAILED: " + what);
}

async function pass(name, fn) {
  await fn();
  passed += 1;
  console.log("PASS " + name);
}

// Starts spark-serve; resolves with {url, proc, exited} once it prints "listening on".
function startServer(extra = []) {
  return new Promise((resolve, reject) => {
    const args = [cubin, "--weights", weights, "--tokenizer", tokenizer,
                  "--device", process.env.SPARK_SERVE_DEVICE || "host",
                  "--port", "0", ...extra];
    const proc = spawn(serveBin, args, { stdio: ["ignore", "ignore", "pipe"] });
    let log = "";
    const exited = new Promise((r) => proc.on("exit", (code, signal) => r({ code, signal, log })));
    const timer = setTimeout(() => reject(new Error("spark-serve did not start: " + log)), 60000);
    proc.stderr.on("data", (d) => {
      log += d.toString();
      const m = log.match(/listening on (http:\/\/[0-9.:]+)/);
      if (m) {
        clearTimeout(timer);
        resolve({ url: m[1], proc, exited, log: () => log });
      }
    });
    proc.on("exit", () => reject(new Error("spark-serve exited: " + log)));
  });
}

const messages = golden.messages;

async function expectError(promise, status, field) {
  try {
    await promise;
  } catch (e) {
    check(e.status === status, `status ${e.status} (${e.message}) should be ${status}`);
    if (field) check(e.error && e.error.param === field, `error param ${JSON.stringify(e.error)} should be ${field}`);
    check(e.error && typeof e.error.message === "string", "an OpenAI error object");
    return e;
  }
  throw new Error(`FAILED: expected HTTP ${status}`);
}

async function raw(url, path, init) {
  const res = await fetch(url + path, init);
  const text = await res.text();
  let body = null;
  try { body = JSON.parse(text); } catch (e) { /* not JSON */ }
  return { status: res.status, body, text };
}

async function metric(url, name) {
  const { text } = await raw(url, "/metrics");
  const m = text.match(new RegExp("^" + name + " (\\S+)$", "m"));
  return m ? Number(m[1]) : NaN;
}

async function main() {
  const server = await startServer(["--max-queue", "64"]);
  const client = new OpenAI({ baseURL: server.url + "/v1", apiKey: "unused", maxRetries: 0 });

  await pass("models.list", async () => {
    const list = await client.models.list();
    check(list.data.length === 1 && list.data[0].id === "tiny-dense", JSON.stringify(list.data));
  });

  await pass("chat, greedy: the text and ids of transformers (as spark-run --chat)", async () => {
    const r = await client.chat.completions.create({
      model: "tiny-dense", messages, max_tokens: 16, temperature: 0 });
    check(r.object === "chat.completion" && r.choices.length === 1, JSON.stringify(r));
    check(r.choices[0].message.role === "assistant", "role");
    check(r.choices[0].message.content === golden.text, `text ${JSON.stringify(r.choices[0].message.content)} != ${JSON.stringify(golden.text)}`);
    check(r.choices[0].finish_reason === (golden.stopped_at_eos ? "stop" : "length"), r.choices[0].finish_reason);
    check(r.usage.prompt_tokens === golden.prompt_ids.length, `prompt_tokens ${r.usage.prompt_tokens}`);
    check(r.usage.completion_tokens === golden.ids.length, `completion_tokens ${r.usage.completion_tokens}`);
    check(r.usage.total_tokens === r.usage.prompt_tokens + r.usage.completion_tokens, "total_tokens");
  });

  await pass("chat, streamed: the same text, chunk by chunk, then usage", async () => {
    const stream = await client.chat.completions.create({
      model: "tiny-dense", messages, max_tokens: 16, temperature: 0, stream: true,
      stream_options: { include_usage: true } });
    let text = "", chunks = 0, finish = null, usage = null, role = null;
    for await (const chunk of stream) {
      check(chunk.object === "chat.completion.chunk", chunk.object);
      if (chunk.usage) usage = chunk.usage;
      for (const c of chunk.choices) {
        if (c.delta.role) role = c.delta.role;
        if (c.delta.content) { text += c.delta.content; chunks += 1; }
        if (c.finish_reason) finish = c.finish_reason;
      }
    }
    check(role === "assistant", "role chunk");
    check(text === golden.text, `streamed ${JSON.stringify(text)}`);
    check(chunks > 1, `${chunks} content chunks`);
    check(finish === "length" || finish === "stop", String(finish));
    check(usage && usage.completion_tokens === golden.ids.length, JSON.stringify(usage));
  });

  await pass("stop strings end the text before them, finish_reason stop", async () => {
    const r = await client.chat.completions.create({
      model: "tiny-dense", messages, max_tokens: 16, temperature: 0, stop: [" tiny"] });
    const expected = golden.text.slice(0, golden.text.indexOf(" tiny"));
    check(r.choices[0].message.content === expected, JSON.stringify(r.choices[0].message.content));
    check(r.choices[0].finish_reason === "stop", r.choices[0].finish_reason);
  });

  await pass("sampling with a seed is reproducible", async () => {
    const ask = (seed) => client.chat.completions.create({
      model: "tiny-dense", messages, max_tokens: 12, temperature: 1.0, top_p: 0.95, seed });
    const a = await ask(7), b = await ask(7);
    check(a.choices[0].message.content === b.choices[0].message.content, "seed 7 twice");
  });

  await pass("completions with token ids: the chat prompt's ids give the chat's text", async () => {
    const r = await client.completions.create({
      model: "tiny-dense", prompt: golden.prompt_ids, max_tokens: 16, temperature: 0 });
    check(r.object === "text_completion", r.object);
    check(r.choices[0].text === golden.text, JSON.stringify(r.choices[0].text));
    check(r.usage.prompt_tokens === golden.prompt_ids.length, "prompt_tokens");
  });

  await pass("completions, streamed", async () => {
    const stream = await client.completions.create({
      model: "tiny-dense", prompt: golden.prompt_ids, max_tokens: 16, temperature: 0, stream: true });
    let text = "";
    for await (const chunk of stream) for (const c of chunk.choices) text += c.text;
    check(text === golden.text, JSON.stringify(text));
  });

  await pass("/tokenize and /detokenize", async () => {
    const t = await raw(server.url, "/tokenize", { method: "POST", body: JSON.stringify({ messages }) });
    check(t.status === 200 && JSON.stringify(t.body.tokens) === JSON.stringify(golden.prompt_ids),
          JSON.stringify(t.body));
    const d = await raw(server.url, "/detokenize", { method: "POST", body: JSON.stringify({ tokens: golden.prompt_ids }) });
    check(d.status === 200 && d.body.prompt === golden.rendered, JSON.stringify(d.body));
  });

  await pass("errors: each with its status and an OpenAI error object", async () => {
    await expectError(client.chat.completions.create({ model: "tiny-dense", messages, n: 2 }), 400, "n");
    await expectError(client.chat.completions.create({ model: "gpt-4o", messages }), 404, "model");
    await expectError(client.chat.completions.create({ model: "tiny-dense", messages, temperature: "hot" }), 400, "temperature");
    await expectError(client.chat.completions.create({ model: "tiny-dense", messages, max_tokens: 100000 }), 400, "max_tokens");
    await expectError(client.chat.completions.create({ model: "tiny-dense", messages: [] }), 400, "messages");
    await expectError(client.chat.completions.create({ model: "tiny-dense", messages, logit_bias: { "5": 10 } }), 400, "logit_bias");
    await expectError(client.chat.completions.create({ model: "tiny-dense", messages: [{ role: "user", content: [{ type: "image_url", image_url: { url: "data:," } }] }] }), 400, "messages[0].content[0].image_url");  // a text-only model: no vision tower
    await expectError(client.completions.create({ model: "tiny-dense", prompt: [1, 2, 99999] }), 400, "prompt");
    const long = "hello ".repeat(600);
    const e = await expectError(client.completions.create({ model: "tiny-dense", prompt: long }), 400);
    check(e.error.code === "context_length_exceeded", JSON.stringify(e.error));
    const bad = await raw(server.url, "/v1/chat/completions", { method: "POST", body: "{not json" });
    check(bad.status === 400 && bad.body && bad.body.error, bad.text);
    const notObject = await raw(server.url, "/v1/chat/completions", { method: "POST", body: "[1]" });
    check(notObject.status === 400 && notObject.body.error, notObject.text);
    const route = await raw(server.url, "/v2/nothing");
    check(route.status === 404 && route.body.error.code === "not_found", route.text);
    const method = await raw(server.url, "/v1/chat/completions");
    check(method.status === 405 && method.body.error, method.text);
    const big = await raw(server.url, "/v1/completions", { method: "POST", body: "x".repeat(9 << 20) });
    check(big.status === 413 && big.body && big.body.error, `${big.status} ${big.text.slice(0, 200)}`);
  });

  await pass("a client that disconnects mid-stream cancels its generation; the server goes on", async () => {
    const cancelled = await metric(server.url, "spark_requests_cancelled_total");
    const finished = await metric(server.url, "spark_requests_finished_total");
    const generated = await metric(server.url, "spark_generation_tokens_total");
    const controller = new AbortController();
    const stream = await client.chat.completions.create({
      model: "tiny-dense", messages, max_tokens: 400, temperature: 0, stream: true },
      { signal: controller.signal });
    try {
      for await (const chunk of stream) {
        if (chunk.choices.length && chunk.choices[0].delta.content) controller.abort();
      }
    } catch (e) { /* the abort */ }
    let now = finished;
    for (let i = 0; i < 200 && now === finished; ++i) {
      await new Promise((r) => setTimeout(r, 50));
      now = await metric(server.url, "spark_requests_finished_total");
    }
    check(now === finished + 1, `the request ended (finished ${finished} -> ${now})`);
    const c = await metric(server.url, "spark_requests_cancelled_total");
    const g = await metric(server.url, "spark_generation_tokens_total") - generated;
    // Cancelled after the client left; or, on a loaded machine, the server (about a token per
    // millisecond here) finished all 400 before the client's abort reached it.
    check(c === cancelled + 1 || g === 400, `cancelled ${cancelled} -> ${c}, ${g} tokens generated`);
    console.log(c === cancelled + 1 ? `  cancelled after ${g} of 400 tokens` : "  it had finished before the client left");
    const r = await client.chat.completions.create({ model: "tiny-dense", messages, max_tokens: 16, temperature: 0 });
    check(r.choices[0].message.content === golden.text, "the next request");
  });

  await pass("soak: 300 requests from 16 concurrent clients, all answered right; no leaks", async () => {
    const expected = golden.text.slice(0, 0);
    const first = await client.chat.completions.create({ model: "tiny-dense", messages, max_tokens: 3, temperature: 0 });
    const want = first.choices[0].message.content;
    let next = 0, ok = 0;
    const worker = async () => {
      while (next < 300) {
        const i = next++;
        const streamIt = i % 3 === 0;
        if (streamIt) {
          const s = await client.chat.completions.create({ model: "tiny-dense", messages, max_tokens: 3, temperature: 0, stream: true });
          let t = "";
          for await (const c of s) for (const ch of c.choices) t += ch.delta.content || "";
          check(t === want, `stream ${i}: ${JSON.stringify(t)}`);
        } else {
          const r = await client.chat.completions.create({ model: "tiny-dense", messages, max_tokens: 3, temperature: 0 });
          check(r.choices[0].message.content === want, `request ${i}`);
        }
        ok += 1;
      }
    };
    await Promise.all(Array.from({ length: 16 }, worker));
    check(ok === 300, `${ok} answered`);
    check(await metric(server.url, "spark_queue_depth") === 0, "queue empty");
    check(await metric(server.url, "spark_requests_running") === 0, "nothing running");
    void expected;
  });

  await pass("32 concurrent requests (up to 32 sessions, steps batched) answer as one at a time", async () => {
    const sessions = await metric(server.url, "spark_sessions");
    check(sessions === 32, `${sessions} sessions (--max-sequences 0: 32)`);
    const pooled = await metric(server.url, "spark_kv_pool_full_length_sessions");
    check(pooled === sessions, `the KV pool holds ${pooled} of ${sessions} sessions at full length (--kv-pool-sequences fit: all of them fit here)`);
    const ask = (i, stream) => {
      const m = [...messages.slice(0, -1),
                 { role: "user", content: messages[messages.length - 1].content + " " + "x".repeat(i % 7) + i }];
      const params = { model: "tiny-dense", messages: m, max_tokens: 12, temperature: 0 };
      if (!stream) return client.chat.completions.create(params).then((r) => r.choices[0].message.content);
      return client.chat.completions.create({ ...params, stream: true }).then(async (s) => {
        let t = "";
        for await (const c of s) for (const ch of c.choices) t += ch.delta.content || "";
        return t;
      });
    };
    const alone = [];
    for (let i = 0; i < 32; ++i) alone.push(await ask(i, false));
    check(new Set(alone).size > 1, "the prompts give different answers");
    const together = await Promise.all(Array.from({ length: 32 }, (_, i) => ask(i, i % 2 === 0)));
    for (let i = 0; i < 32; ++i) check(together[i] === alone[i], `request ${i}: ${JSON.stringify(together[i])} != ${JSON.stringify(alone[i])}`);
  });

  await pass("prefix sharing: a conversation with another's system prompt reads its KV blocks, answers as without", async () => {
    const system = { role: "system", content: "You answer briefly and never guess. ".repeat(4) };
    const ask = (c, q) => c.chat.completions.create({
      model: "tiny-dense", messages: [system, { role: "user", content: q }], max_tokens: 10,
      temperature: 0 }).then((r) => r.choices[0].message.content);
    const before = await metric(server.url, "spark_prefix_cache_shared_tokens_total");
    // The second request runs on a session of its own (the first's keeps its conversation) and
    // shares the first's blocks of the system prompt.
    const first = await ask(client, "What is a compiler?");
    const second = await ask(client, "And a runtime?");
    const shared = await metric(server.url, "spark_prefix_cache_shared_tokens_total") - before;
    check(shared >= 16, `${shared} prompt tokens shared`);
    const ratio = await metric(server.url, "spark_prefix_cache_hit_ratio");
    check(ratio > 0 && ratio <= 1, `hit ratio ${ratio}`);
    // A burst with a system prompt no session holds yet: the requests arrive together, and those
    // that find another prefilling it wait for that prefill and share it (how many do depends on
    // timing); the answers are those of requests run one at a time without sharing.
    const burstSystem = { role: "system", content: "Reply in one short sentence, plainly. ".repeat(4) };
    const askBurst = (c, q) => c.chat.completions.create({
      model: "tiny-dense", messages: [burstSystem, { role: "user", content: q }], max_tokens: 8,
      temperature: 0 }).then((r) => r.choices[0].message.content);
    const questions = ["Why?", "How so?", "What else?", "When?", "Where to?", "Who?"];
    const awaitedBefore = await metric(server.url, "spark_prefix_cache_awaited_total");
    const burst = await Promise.all(questions.map((q) => askBurst(client, q)));
    const awaited = await metric(server.url, "spark_prefix_cache_awaited_total") - awaitedBefore;
    check(Number.isInteger(awaited) && awaited >= 0 && awaited < questions.length,
          `spark_prefix_cache_awaited_total grew by ${awaited}`);
    const plain = await startServer(["--no-prefix-sharing"]);
    try {
      const pc = new OpenAI({ baseURL: plain.url + "/v1", apiKey: "unused", maxRetries: 0 });
      check(await ask(pc, "What is a compiler?") === first, "the first answer, without sharing");
      check(await ask(pc, "And a runtime?") === second, "the second answer, without sharing");
      for (let i = 0; i < questions.length; ++i) {
        const one = await askBurst(pc, questions[i]);
        check(one === burst[i], `burst request ${i}: ${JSON.stringify(burst[i])} != ${JSON.stringify(one)} without sharing`);
      }
      check(await metric(plain.url, "spark_prefix_cache_awaited_total") === 0, "no request waited with --no-prefix-sharing");
      check(await metric(plain.url, "spark_prefix_cache_shared_tokens_total") === 0, "nothing shared with --no-prefix-sharing");
    } finally {
      plain.proc.kill("SIGTERM");
      await plain.exited;
    }
  });

  await pass("SIGTERM during a stream: the stream ends properly, the server exits 0", async () => {
    const stream = await client.chat.completions.create({
      model: "tiny-dense", messages, max_tokens: 400, temperature: 0, stream: true });
    let n = 0, finish = null;
    for await (const chunk of stream) {
      if (++n === 3) server.proc.kill("SIGTERM");
      for (const c of chunk.choices) if (c.finish_reason) finish = c.finish_reason;
    }
    check(finish !== null, "a final chunk with a finish_reason");
    const { code } = await server.exited;
    check(code === 0, `exit code ${code}`);
  });

  const keyed = await startServer(["--api-key", "s3cret", "--max-queue", "1", "--max-sequences", "1"]);
  await pass("--api-key: 401 without the key, 200 with it; /health stays open", async () => {
    const wrong = new OpenAI({ baseURL: keyed.url + "/v1", apiKey: "nope", maxRetries: 0 });
    await expectError(wrong.models.list(), 401);
    const right = new OpenAI({ baseURL: keyed.url + "/v1", apiKey: "s3cret", maxRetries: 0 });
    check((await right.models.list()).data[0].id === "tiny-dense", "with the key");
    check((await raw(keyed.url, "/health")).status === 200, "health");
  });
  await pass("a full queue answers 503", async () => {
    const right = new OpenAI({ baseURL: keyed.url + "/v1", apiKey: "s3cret", maxRetries: 0 });
    const attempts = Array.from({ length: 6 }, () => right.chat.completions.create({
      model: "tiny-dense", messages, max_tokens: 60, temperature: 0 }).then(() => 200, (e) => e.status));
    const statuses = await Promise.all(attempts);
    check(statuses.includes(503) && statuses.includes(200), JSON.stringify(statuses));
  });
  keyed.proc.kill("SIGINT");
  const { code } = await keyed.exited;
  check(code === 0, `SIGINT exit ${code}`);
  console.log(`openai-client: ${passed} checks passed`);
}

main().catch((e) => { console.error(e.stack || String(e)); process.exit(1); });
