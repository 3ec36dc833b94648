// A word-level diff of two texts, for the samples panel: what changed in a prompt's output
// from one step to the next. Texts split into words, runs of white space and single other
// characters; the common start and end are taken off first (outputs of neighbouring steps
// mostly share them), then the longest common subsequence of the rest is found by dynamic
// programming. White space between two changes joins them ("a b" -> "x y" is one change, not
// two around a kept space), and each change reads as what was removed, then what was added.
// Past `maxCells` (words before × words after, what the table costs) there is no diff.

const TOKEN = /\s+|[\p{L}\p{N}_]+|[^\s\p{L}\p{N}_]/gu;
const SPACE = /^\s+$/;

/** The tokens of a text, in order; joined they give the text back. */
export function tokens(text) {
  return text.match(TOKEN) || [];
}

/** [op, token] per token: "=" in both, "-" only in `a`, "+" only in `b` (null past maxCells). */
function tokenOps(a, b, maxCells) {
  let start = 0;
  while (start < a.length && start < b.length && a[start] === b[start]) start++;
  let endA = a.length;
  let endB = b.length;
  while (endA > start && endB > start && a[endA - 1] === b[endB - 1]) {
    endA--;
    endB--;
  }
  const n = endA - start;
  const m = endB - start;
  if (n * m > maxCells) return null;
  // The middle tokens as numbers (equal tokens, equal numbers), and
  // lcs[i * (m + 1) + j]: the longest common subsequence of x[i..n) and y[j..m).
  const ids = new Map();
  const id = (t) => ids.get(t) ?? ids.set(t, ids.size).get(t);
  const x = Int32Array.from(a.slice(start, endA), id);
  const y = Int32Array.from(b.slice(start, endB), id);
  const width = m + 1;
  const lcs = new Uint32Array((n + 1) * width);
  for (let i = n - 1; i >= 0; i--) {
    const row = i * width;
    const below = row + width;
    const xi = x[i];
    for (let j = m - 1; j >= 0; j--) {
      lcs[row + j] = xi === y[j] ? lcs[below + j + 1] + 1 : Math.max(lcs[below + j], lcs[row + j + 1]);
    }
  }
  const ops = a.slice(0, start).map((t) => ["=", t]);
  for (let i = 0, j = 0; i < n || j < m;) {
    if (i < n && j < m && x[i] === y[j]) {
      ops.push(["=", a[start + i]]);
      i++;
      j++;
    } else if (j === m || (i < n && lcs[(i + 1) * width + j] >= lcs[i * width + j + 1])) {
      ops.push(["-", a[start + i++]]);
    } else {
      ops.push(["+", b[start + j++]]);
    }
  }
  for (let i = endA; i < a.length; i++) ops.push(["=", a[i]]);
  return ops;
}

/**
 * The changes from `before` to `after` as runs `{op, text}`: `op` "=" (in both), "-" (only in
 * before) or "+" (only in after). The "=" and "-" runs joined give `before`, the "=" and "+"
 * runs `after`; between two "=" runs there is a "-", a "+", or a "-" then a "+". Null when the
 * texts differ in more than can be compared within `maxCells`.
 */
export function wordDiff(before, after, maxCells = 4_000_000) {
  const ops = tokenOps(tokens(before), tokens(after), maxCells);
  if (ops === null) return null;
  const runs = [];
  let removed = "";
  let added = "";
  const flush = () => {
    if (removed) runs.push({ op: "-", text: removed });
    if (added) runs.push({ op: "+", text: added });
    removed = added = "";
  };
  /** Whether the first token after `k` that is not kept white space is a change. */
  const changeNext = (k) => {
    while (++k < ops.length && ops[k][0] === "=" && SPACE.test(ops[k][1]));
    return k < ops.length && ops[k][0] !== "=";
  };
  ops.forEach(([op, text], k) => {
    if (op === "=" && !((removed || added) && SPACE.test(text) && changeNext(k))) {
      flush();
      const last = runs[runs.length - 1];
      if (last && last.op === "=") last.text += text;
      else runs.push({ op, text });
    } else {
      if (op !== "+") removed += text;
      if (op !== "-") added += text;
    }
  });
  flush();
  return runs;
}
