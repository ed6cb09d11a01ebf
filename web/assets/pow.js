// The sale gate's proof of work, in a Web Worker so the buyer page stays
// responsive while it runs. Given {challenge, bits}, it finds a decimal
// nonce such that SHA-256(challenge ":" nonce) starts with `bits` zero
// bits, hashing in batches (crypto.subtle answers with promises; a batch
// keeps several in flight), and posts {tried} after every batch and
// {nonce, tried, ms} once solved. The server checks the answer with one
// hash; the buyer's browser pays about 2^bits of them.
"use strict";

const BATCH = 512;

function zeroBits(bytes) {
  let zeros = 0;
  for (const b of bytes) {
    if (b === 0) {
      zeros += 8;
      continue;
    }
    return zeros + Math.clz32(b) - 24;
  }
  return zeros;
}

self.onmessage = async (event) => {
  const challenge = String(event.data.challenge);
  const bits = Number(event.data.bits);
  const encoder = new TextEncoder();
  const started = performance.now();
  // From a random point: a second purchase of the same window solves the
  // same challenge again, and each solution gives a pass that buys once,
  // so it must not find the first solution again.
  const from = Math.floor(Math.random() * 2 ** 40);
  for (let n = 0; ; n += BATCH) {
    const batch = [];
    for (let i = 0; i < BATCH; i++) {
      batch.push(crypto.subtle.digest("SHA-256", encoder.encode(challenge + ":" + (from + n + i))));
    }
    const digests = await Promise.all(batch);
    for (let i = 0; i < BATCH; i++) {
      if (zeroBits(new Uint8Array(digests[i])) >= bits) {
        self.postMessage({ nonce: String(from + n + i), tried: n + i + 1, ms: performance.now() - started });
        return;
      }
    }
    self.postMessage({ tried: n + BATCH });
  }
};
