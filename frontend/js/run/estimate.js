// The memory estimate: the ZeRO accounting of `runcast estimate` (GET /api/v1/estimate) for the
// run's config, when it carries a parameter count. The inputs start from the run and can be changed.

import { getJSON } from "../api.js";
import { debounce, el, table } from "../util.js";
import { formatNumber, t } from "../i18n.js";

const $ = (id) => document.getElementById(id);

// Memory estimate: the ZeRO accounting of `runcast estimate`, for the run's config.
const PARAM_KEY = /^(n_params|num_params|params|num_parameters|n_parameters|parameters|param_count|n_param)$/i;
const SHAPE_KEYS = {
  layers: /^(n_layers?|num_layers|num_hidden_layers|layers)$/i,
  hidden: /^(n_embd|n_embed|hidden_size|d_model|hidden)$/i,
  heads: /^(n_heads?|num_heads|num_attention_heads|heads)$/i,
  seq_len: /^(block_size|seq_len|seq_length|max_seq_len|context_length|sequence_length)$/i,
  micro_batch: /^(train_micro_batch_size_per_gpu|micro_batch_size|micro_batch|per_device_train_batch_size|batch_size)$/i,
};

/** A positive number under a key matching `re`: top level first, then one level of nesting. */
function configNumber(config, re) {
  const asNumber = (v) => {
    const n = typeof v === "number" ? v : typeof v === "string" && v.trim() !== "" ? Number(v) : NaN;
    return Number.isFinite(n) && n > 0 ? n : null;
  };
  const top = Object.entries(config || {});
  for (const [k, v] of top) if (re.test(k) && asNumber(v) !== null) return { key: k, value: asNumber(v) };
  for (const [k, v] of top) {
    if (!v || typeof v !== "object" || Array.isArray(v)) continue;
    for (const [k2, v2] of Object.entries(v)) if (re.test(k2) && asNumber(v2) !== null) return { key: k + "." + k2, value: asNumber(v2) };
  }
  return null;
}

/** ZeRO stage and optimizer offload from a DeepSpeed config inside the run's config. */
function zeroFromConfig(config) {
  const c = config || {};
  const candidates = [["deepspeed", c.deepspeed], ["ds_config", c.ds_config], ["deepspeed_config", c.deepspeed_config], ["", c]];
  for (const [name, ds] of candidates) {
    const zo = ds && typeof ds === "object" ? ds.zero_optimization : null;
    if (!zo || typeof zo !== "object") continue;
    const stage = Number(zo.stage);
    if (![0, 1, 2, 3].includes(stage)) continue;
    const device = zo.offload_optimizer && typeof zo.offload_optimizer === "object" ? zo.offload_optimizer.device : null;
    const offload = stage > 0 && (device === "cpu" || device === "nvme" || zo.cpu_offload === true);
    return { stage, offload, source: (name ? name + "." : "") + "zero_optimization.stage" };
  }
  const stage = Number(c.zero_stage);
  if ([0, 1, 2, 3].includes(stage)) return { stage, offload: false, source: "zero_stage" };
  return { stage: 0, offload: false, source: null };
}

/** The panel: set up from the run's config once, then recomputed whenever an input changes. */
export class EstimatePanel {
  constructor() {
    this.setUp = false;
    this.seq = 0;
  }

  update(detail) {
    const card = $("estimate-card");
    const params = configNumber(detail.config, PARAM_KEY);
    if (!params) {
      card.hidden = true;
      return;
    }
    card.hidden = false;
    if (this.setUp) return; // the user's inputs stay as they are
    this.setUp = true;
    this.start(detail, params);
  }

  start(detail, params) {
    const env = detail.env || {};
    const gpus = Number.isSafeInteger(env.world_size) && env.world_size > 0 ? env.world_size : 1;
    const zero = zeroFromConfig(detail.config);
    $("est-params").value = String(params.value);
    $("est-gpus").value = String(gpus);
    $("est-zero").value = String(zero.stage);
    $("est-offload").checked = zero.offload;
    const shape = {};
    for (const [name, re] of Object.entries(SHAPE_KEYS)) {
      const found = configNumber(detail.config, re);
      if (found && Number.isSafeInteger(found.value)) shape[name] = found.value;
    }
    if (!(shape.layers && shape.hidden)) delete shape.heads; // the server assumes the whole shape from Ψ then
    const form = $("estimate-form");
    this.sources = [
      t("estimate.fromParams", { key: params.key }),
      Number.isSafeInteger(env.world_size) ? t("estimate.gpusFromEnv", { key: "env.world_size" }) : t("estimate.gpusDefault"),
      zero.source ? t("estimate.zeroFrom", { source: zero.source }) : t("estimate.zeroDefault"),
    ];
    form.dataset.sources = this.sources.join("; ");
    const refresh = debounce(() => this.fetch(shape), 250);
    form.addEventListener("input", refresh);
    form.addEventListener("change", refresh);
    form.addEventListener("submit", (ev) => { ev.preventDefault(); refresh(); });
    this.fetch(shape);
  }

  async fetch(shape) {
    const q = new URLSearchParams({
      params: $("est-params").value.trim(),
      gpus: $("est-gpus").value.trim(),
      zero: $("est-zero").value,
      offload_optimizer: $("est-offload").checked ? "true" : "false",
    });
    for (const [k, v] of Object.entries(shape)) q.set(k, String(v));
    const seq = ++this.seq;
    const box = $("estimate");
    let result;
    try {
      result = await getJSON("/api/v1/estimate?" + q);
    } catch (err) {
      if (seq === this.seq) box.replaceChildren(el("p", { className: "error", role: "alert", text: t("estimate.failed", { error: err.message }) }));
      return;
  }
  if (seq !== this.seq) return; // a newer request is on its way
  const b = result.bytes;
  const s = result.shape;
  const rows = [
    [t("estimate.weights"), formatGB(b.weights)],
    [t("estimate.gradients"), formatGB(b.gradients)],
    [t("estimate.optimizer"), formatGB(b.optimizer)],
    [t("estimate.modelStates"), formatGB(b.total)],
  ];
  if (result.offload_optimizer) rows.push([t("estimate.cpu"), formatGB(b.cpu_optimizer)]);
  rows.push(
    [s.activation_checkpointing ? t("estimate.activationsCheckpointed") : t("estimate.activations", { formula: "L·s·b·h·(34 + 5·a·s/h)" }), formatGB(b.activations)],
    [t("estimate.total"), formatGB(b.gpu_total)],
  );
  const tbl = table(rows, { labels: true });
  tbl.id = "estimate-table";
  const shapeNote = t(s.assumed ? "estimate.shapeAssumed" : "estimate.shapeConfig",
    { layers: s.layers, hidden: s.hidden, heads: s.heads, seq: s.seq_len, batch: s.micro_batch });
  const sources = (this.sources || []).flatMap((text, i) => (i ? ["; ", text] : [text])); // a message each
  box.replaceChildren(tbl, el("p", { className: "note", text: shapeNote }), el("p", { className: "note" }, ...sources));
  }
}

function formatGB(bytes) {
  if (typeof bytes !== "number" || !Number.isFinite(bytes)) return "–";
  const one = { maximumFractionDigits: 1, minimumFractionDigits: 1 };
  if (bytes === 0 || bytes >= 0.05e9) return formatNumber(bytes / 1e9, one) + " GB";
  if (bytes >= 0.05e6) return formatNumber(bytes / 1e6, one) + " MB";
  return formatNumber(bytes / 1e3, one) + " kB";
}
