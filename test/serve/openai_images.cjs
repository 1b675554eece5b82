// Images through spark-serve, driven by the official OpenAI Node client as users send them:
// image_url content parts with data: URLs (PNG and JPEG), one and two images in a message,
// streamed and not; the answers equal spark-run's for the same chat and images (the expected
// file), and bad images, remote URLs and audio parts are refused with a 400 naming the part.
// Prints "PASS <check>" per check and "openai-images: N checks passed"; exits 1 at the first
// failure.
//
// usage: node openai_images.cjs SPARK_SERVE MODEL WEIGHTS TOKENIZER_DIR IMAGES_DIR EXPECTED.json
// EXPECTED.json: {"one": spark-run --json of "<image>What is in the image?" with vision_a.png,
//                 "two": of "Compare <image> with <image>" with vision_a.png, vision_b.jpg}
"use strict";
const { spawn } = require("child_process");
const fs = require("fs");
const path = require("path");
const OpenAI = require("openai");

const [serveBin, model, weights, tokenizer, imagesDir, expectedFile] = process.argv.slice(2);
const expected = JSON.parse(fs.readFileSync(expectedFile, "utf8"));
let passed = 0;

function check(cond, what) {
  if (!cond) throw new Error("FAILED: " + what);
}

async function pass(name, fn) {
  await fn();
  passed += 1;
  console.log("PASS " + name);
}

function startServer(extra = []) {
  return new Promise((resolve, reject) => {
    const args = [model, "--weights", weights, "--tokenizer", tokenizer,
                  "--device", process.env.SPARK_SERVE_DEVICE || "host", "--port", "0", ...extra];
    const proc = spawn(serveBin, args, { stdio: ["ignore", "ignore", "pipe"] });
    let log = "";
    const timer = setTimeout(() => reject(new Error("spark-serve did not start: " + log)), 60000);
    proc.stderr.on("data", (d) => {
      log += d.toString();
      const m = log.match(/listening on (http:\/\/[0-9.:]+)/);
      if (m) {
        clearTimeout(timer);
        resolve({ url: m[1], proc });
      }
    });
    proc.on("exit", () => reject(new Error("spark-serve exited: " + log)));
  });
}

function dataUrl(file, mime) {
  return `data:${mime};base64,` + fs.readFileSync(path.join(imagesDir, file)).toString("base64");
}
const imageA = { type: "image_url", image_url: { url: dataUrl("vision_a.png", "image/png") } };
const imageB = { type: "image_url", image_url: { url: dataUrl("vision_b.jpg", "image/jpeg") } };

async function expectError(promise, status, field, says) {
  try {
    await promise;
  } catch (e) {
    check(e.status === status, `status ${e.status} (${e.message}) should be ${status}`);
    check(e.error && e.error.param === field, `error param ${JSON.stringify(e.error)} should be ${field}`);
    check(e.error.message.includes(says), `error ${JSON.stringify(e.error.message)} should say ${says}`);
    return;
  }
  throw new Error(`FAILED: expected HTTP ${status}`);
}

async function main() {
  const server = await startServer(["--image-tokens", "70"]);
  const client = new OpenAI({ baseURL: server.url + "/v1", apiKey: "unused", maxRetries: 0 });
  const ask = (content, extra = {}) => client.chat.completions.create({
    model: path.basename(model, path.extname(model)), messages: [{ role: "user", content }],
    max_tokens: expected.one.ids.length, temperature: 0, ...extra });

  await pass("one PNG image: the text and token counts of spark-run --chat --image", async () => {
    const r = await ask([imageA, { type: "text", text: "What is in the image?" }]);
    check(r.choices[0].message.content === expected.one.text,
          `text ${JSON.stringify(r.choices[0].message.content)} != ${JSON.stringify(expected.one.text)}`);
    check(r.usage.prompt_tokens === expected.one.timings.prefill_tokens,
          `prompt_tokens ${r.usage.prompt_tokens} != ${expected.one.timings.prefill_tokens} (63 soft tokens + boi/eoi)`);
    check(r.usage.completion_tokens === expected.one.ids.length, "completion_tokens");
  });

  await pass("two images (PNG, JPEG) in one message, streamed", async () => {
    const stream = await ask([{ type: "text", text: "Compare " }, imageA,
                              { type: "text", text: " with " }, imageB],
                             { stream: true, stream_options: { include_usage: true } });
    let text = "", usage = null;
    for await (const chunk of stream) {
      if (chunk.usage) usage = chunk.usage;
      for (const c of chunk.choices) if (c.delta.content) text += c.delta.content;
    }
    check(text === expected.two.text, `text ${JSON.stringify(text)} != ${JSON.stringify(expected.two.text)}`);
    check(usage && usage.prompt_tokens === expected.two.timings.prefill_tokens,
          `prompt_tokens ${JSON.stringify(usage)}`);
  });

  const part = "messages[0].content[0].image_url";
  await pass("a remote URL is refused with 400: nothing is fetched", async () => {
    await expectError(ask([{ type: "image_url", image_url: { url: "https://example.com/cat.png" } },
                           { type: "text", text: "Hi" }]), 400, part, "remote image URLs are not fetched");
  });
  await pass("a broken image is refused with 400", async () => {
    const png = fs.readFileSync(path.join(imagesDir, "vision_a.png")).subarray(0, 300);
    await expectError(ask([{ type: "image_url", image_url: { url: "data:image/png;base64," + png.toString("base64") } }]),
                      400, part, "truncated");
    await expectError(ask([{ type: "image_url", image_url: { url: "data:image/png;base64,%%%" } }]),
                      400, part, "does not decode");
  });
  await pass("audio parts are refused with 400", async () => {
    await expectError(ask([{ type: "input_audio", input_audio: { data: "", format: "wav" } }]),
                      400, "messages[0].content", "audio is not supported");
  });
  await pass("the server still answers after the refusals", async () => {
    const r = await ask([imageA, { type: "text", text: "What is in the image?" }]);
    check(r.choices[0].message.content === expected.one.text, "same text again");
  });

  server.proc.kill("SIGTERM");
  console.log(`openai-images: ${passed} checks passed`);
}

main().catch((e) => {
  console.error(e.message || e);
  process.exit(1);
});
