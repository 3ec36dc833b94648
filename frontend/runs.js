// The runs page: lists public runs from /api/v1/runs, newest first.
// Every piece of run data is set with textContent, never parsed as HTML.
"use strict";

const API = "/api/v1/runs";
const PAGE = 50;
const LOSS_KEYS = ["loss", "train/loss", "train_loss", "lm_loss"];

function lastLoss(lastValues) {
  const keys = Object.keys(lastValues || {});
  const key = LOSS_KEYS.find((k) => k in lastValues) || keys.find((k) => /loss$/i.test(k));
  if (!key) return "";
  const value = lastValues[key].value;
  return typeof value === "number" ? value.toPrecision(5) : String(value);
}

function formatTime(seconds) {
  if (seconds === null || seconds === undefined) return "";
  return new Date(seconds * 1000).toISOString().replace("T", " ").slice(0, 19) + " UTC";
}

function cell(row, text, className) {
  const td = document.createElement("td");
  td.textContent = text;
  if (className) td.className = className;
  row.appendChild(td);
  return td;
}

function renderRun(run) {
  const row = document.createElement("tr");
  cell(row, run.project);
  cell(row, run.name);
  cell(row, run.status, "status-" + run.status);
  cell(row, run.last_step === null ? "" : String(run.last_step), "num");
  cell(row, lastLoss(run.last_values), "num");
  cell(row, formatTime(run.started_at ?? run.created_at));
  return row;
}

async function loadPage(cursor) {
  const status = document.getElementById("status");
  const table = document.getElementById("runs");
  const more = document.getElementById("more");
  const params = new URLSearchParams({ limit: String(PAGE) });
  if (cursor) params.set("cursor", cursor);
  more.disabled = true;
  try {
    const response = await fetch(API + "?" + params.toString(), { headers: { Accept: "application/json" } });
    const body = await response.json();
    if (!response.ok) throw new Error((body.error && body.error.message) || response.statusText);
    const tbody = table.tBodies[0];
    for (const run of body.runs) tbody.appendChild(renderRun(run));
    const count = tbody.rows.length;
    table.hidden = count === 0;
    status.textContent = count === 0 ? "No public runs yet." : count + (count === 1 ? " run" : " runs");
    more.hidden = !body.next_cursor;
    more.onclick = () => loadPage(body.next_cursor);
  } catch (err) {
    status.textContent = "Could not load runs: " + err.message;
  } finally {
    more.disabled = false;
  }
}

document.addEventListener("DOMContentLoaded", () => loadPage(null));
