// The console's funnel chart (SVG): the API's own 10-second buckets as
// running totals, so a reload keeps its history.

import { number, time } from "./format.js";
import { state, ui } from "./ops-state.js";

const SVG_NS = "http://www.w3.org/2000/svg";
// The API's funnel bucket (`/live`'s `funnel`).
const BUCKET_MS = 10000;

function svg(tag, attrs, text) {
  const el = document.createElementNS(SVG_NS, tag);
  Object.entries(attrs || {}).forEach(([k, v]) => el.setAttribute(k, v));
  if (text !== undefined) el.textContent = text;
  return el;
}

// The y axis: about four whole-number steps of 1, 2, 2.5 or 5 times a
// power of ten, and a top that is a multiple of the step.
function yAxis(max) {
  const raw = Math.max(1, max) / 4;
  const power = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 2.5, 5, 10]
    .map((m) => m * power)
    .filter(Number.isInteger)
    .find((m) => m >= raw);
  return { step: step, top: Math.max(step, Math.ceil(Math.max(1, max) / step) * step) };
}

const SERIES = [
  ["accepted", "Accepted"],
  ["soldOut", "Sold out"],
  ["refused", "Other refusals"],
];

// The API's buckets as running totals: each point is the end of a
// bucket, after a first point at 0 where the first bucket begins.
function funnelPoints() {
  const buckets = state.funnel;
  if (!buckets.length) return [];
  const totals = { accepted: 0, soldOut: 0, refused: 0 };
  const points = [{ at: buckets[0].atMs, accepted: 0, soldOut: 0, refused: 0 }];
  for (const b of buckets) {
    const o = b.outcomes || {};
    for (const [code, n] of Object.entries(o)) {
      const count = Number(n) || 0;
      if (code === "ACCEPTED") totals.accepted += count;
      else if (code === "SOLD_OUT") totals.soldOut += count;
      // A lottery ticket is neither an order nor a refusal.
      else if (code !== "REPLAYED" && code !== "TICKET") totals.refused += count;
    }
    points.push(Object.assign({ at: b.atMs + BUCKET_MS }, totals));
  }
  return points;
}

export function drawFunnel() {
  const points = funnelPoints();
  // Drawn at the container's own width in CSS pixels, not scaled: the
  // labels keep their size on a phone and on a wide screen.
  const W = Math.max(280, Math.round(ui.funnel.clientWidth));
  const H = W < 500 ? 200 : 260;
  const left = 46;
  const right = 12;
  const top = 10;
  const bottom = 26;
  const last = points[points.length - 1];
  const axis = yAxis(last ? Math.max(last.accepted, last.soldOut, last.refused) : 0);
  const yMax = axis.top;
  const t0 = points.length ? points[0].at : 0;
  const t1 = points.length ? last.at : 1;
  const x = (at) => (t1 > t0 ? left + ((at - t0) / (t1 - t0)) * (W - left - right) : W - right);
  const y = (v) => top + (1 - v / yMax) * (H - top - bottom);

  const summary = last
    ? "Funnel since " + time(t0) + ": " + SERIES.map(([key, label]) => label + " " + last[key]).join(", ")
    : "Funnel: no purchase answers yet";
  const chart = svg("svg", {
    viewBox: "0 0 " + W + " " + H,
    width: W,
    height: H,
    role: "img",
    "aria-label": summary,
    "data-from": points.length ? String(t0) : "",
    "data-buckets": String(Math.max(0, points.length - 1)),
  });
  chart.append(svg("title", {}, summary));

  for (let value = 0; value <= yMax; value += axis.step) {
    chart.append(svg("line", { class: "grid", x1: left, x2: W - right, y1: y(value), y2: y(value) }));
    chart.append(
      svg("text", { class: "axis-label", x: left - 6, y: y(value) + 4, "text-anchor": "end" }, number(value))
    );
  }
  if (points.length) {
    chart.append(svg("text", { class: "axis-label", x: left, y: H - 6 }, time(t0)));
    chart.append(svg("text", { class: "axis-label", x: W - right, y: H - 6, "text-anchor": "end" }, time(t1)));
  }
  SERIES.forEach(([key]) => {
    if (!points.length) return;
    const d = points.map((p, i) => (i ? "L" : "M") + x(p.at).toFixed(1) + " " + y(p[key]).toFixed(1)).join(" ");
    chart.append(svg("path", { class: "series " + key, d: d }));
  });
  ui.funnel.replaceChildren(chart);
}
