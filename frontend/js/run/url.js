// The run page's view state in the URL query, so that a view can be shared as a link:
//   keys=train/loss,val/loss  metrics on the loss chart      x=step|tokens|time|relative  x
//   smooth=0.6                EMA strength (0 = off)         log=1               log y axis
//   start=..&end=..           visible x range (x-axis units)  panels=lr,grad_norm only these panels
// The compare page adds runs=a,b (the runs compared) and all=1 (every config key, not only
// those that differ).

import { DEFAULT_SMOOTHING } from "../chart/smoothing.js";

export function readUrl(search) {
  const q = new URLSearchParams(search);
  const list = (name) => (q.get(name) ? q.get(name).split(",").filter(Boolean) : null);
  const num = (name) => (q.get(name) !== null && q.get(name) !== "" && Number.isFinite(Number(q.get(name))) ? Number(q.get(name)) : null);
  const smooth = num("smooth");
  const start = num("start");
  const end = num("end");
  return {
    runs: list("runs"),
    all: q.get("all") === "1",
    keys: list("keys"),
    panels: list("panels"),
    x: q.get("x") || "step",
    xChosen: q.has("x"), // otherwise the axis a metric was declared with (run.define_metric) is the default
    smooth: smooth === null ? DEFAULT_SMOOTHING : Math.min(0.99, Math.max(0, smooth)),
    log: q.get("log") === "1",
    range: start !== null && end !== null && end > start ? [start, end] : null,
  };
}

/** Rewrite the address bar (replaceState: the back button is not flooded). */
export function writeUrl(state) {
  const q = new URLSearchParams();
  if (state.runs && state.runs.length) q.set("runs", state.runs.join(","));
  if (state.keys) q.set("keys", state.keys.join(","));
  if (state.panels) q.set("panels", state.panels.join(","));
  if (state.x !== "step" || state.xChosen) q.set("x", state.x);
  if (state.smooth !== DEFAULT_SMOOTHING) q.set("smooth", String(state.smooth));
  if (state.log) q.set("log", "1");
  if (state.all) q.set("all", "1");
  if (state.range) {
    const digits = state.x === "step" ? 0 : 6;
    q.set("start", state.range[0].toFixed(digits));
    q.set("end", state.range[1].toFixed(digits));
  }
  const search = q.toString().replace(/%2F/g, "/").replace(/%2C/g, ",");
  history.replaceState(null, "", location.pathname + (search ? "?" + search : ""));
}
