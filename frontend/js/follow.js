// Following a run through a cache (docs/live.md, "Following a run through a cache"): the page
// polls the run's broadcast edge about once a second and fetches the sealed pieces it lacks,
// objects a shared cache keeps and hands to every viewer. It calls the same callbacks as the
// LiveStream (live.js): onReset(version, info) when it (re)starts after `version`, then
// onBatch(message) for every later version, in order, none twice.
//
// The first reset reaches back two pieces before the edge's unsealed part: the page's REST
// reads come through the same cache and may be a second or two older than the edge, and the
// store applies the messages after each answer's version only when it holds them.

const VISIBLE_MS = 1000;
const HIDDEN_MS = 10000;
const MAX_BACKOFF_MS = 30000;
const BACK_PIECES = 2;
// Further behind than this many pieces (a tab asleep for long): start over through REST.
const MAX_CATCH_UP_PIECES = 16;
const OFFLINE_AFTER = 3;

export class BroadcastFollower {
  /** Same callbacks as LiveStream: onBatch(message), onReset(version, {initial, at}), onState(state). */
  constructor(runId, { onBatch, onReset, onState = () => {} }) {
    this.base = "/api/v1/runs/" + encodeURIComponent(runId) + "/broadcast/";
    this.onBatch = onBatch;
    this.onReset = onReset;
    this.onState = onState;
    this.policy = null;
    this.held = null; // the last version handed on
    this.etag = null;
    this.failures = 0;
    this.timer = null;
    this.closed = false;
    this.live = false;
    this.onVisible = () => {
      if (!document.hidden) this.schedule(0);
    };
  }

  start() {
    document.addEventListener("visibilitychange", this.onVisible);
    this.schedule(0);
    return this;
  }

  close() {
    this.closed = true;
    clearTimeout(this.timer);
    document.removeEventListener("visibilitychange", this.onVisible);
  }

  get open() {
    return this.live && !this.closed;
  }

  /** The last version handed on (a number), or null before the first. */
  get version() {
    return this.held;
  }

  schedule(ms) {
    if (this.closed) return;
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.tick(), ms);
  }

  async tick() {
    let wait = document.hidden ? HIDDEN_MS : VISIBLE_MS;
    try {
      await this.poll();
      this.failures = 0;
      if (!this.live) {
        this.live = true;
        this.onState("live");
      }
    } catch {
      this.failures += 1;
      this.live = false;
      this.onState(this.failures >= OFFLINE_AFTER ? "offline" : "reconnecting");
      wait = Math.min(MAX_BACKOFF_MS, VISIBLE_MS * 2 ** this.failures);
    }
    this.schedule(wait);
  }

  async get(path, headers = {}, cache = "default") {
    const response = await fetch(this.base + path, { headers: { Accept: "application/json", ...headers }, cache });
    if (response.status === 304) return null;
    if (!response.ok) throw new Error(path + ": HTTP " + response.status);
    return { body: await response.json(), etag: response.headers.get("ETag") };
  }

  /** One round: the edge (revalidated), then the pieces after what is held. */
  async poll() {
    const got = await this.get("edge", this.etag ? { "If-None-Match": this.etag } : {}, "no-store");
    if (got === null || this.closed) return; // unchanged
    const edge = got.body;
    const size = edge.piece_versions;
    const unsealed = edge.last_piece === null ? 0 : (edge.last_piece + 1) * size;
    if (edge.policy !== this.policy || (this.held !== null && unsealed - this.held > MAX_CATCH_UP_PIECES * size)) {
      // A new publication policy (all held was published under the old one) or a gap too long
      // to fill piece by piece: start over after an older version; the page reads again.
      const from = Math.max(0, unsealed - BACK_PIECES * size);
      const initial = this.policy === null;
      this.policy = edge.policy;
      this.held = from;
      this.onReset(from, { initial, at: performance.now() });
    } else if (edge.version <= this.held) {
      this.etag = got.etag;
      return; // an edge older than what is held (a cache's copy): nothing new
    }
    for (let n = Math.floor(this.held / size); n <= (edge.last_piece ?? -1); n++) {
      const piece = await this.get("pieces/" + n + "?policy=" + this.policy);
      if (piece === null || this.closed) return;
      this.deliver(piece.body.messages);
      this.held = Math.max(this.held, piece.body.last_version);
    }
    this.deliver(edge.messages);
    this.held = Math.max(this.held, edge.version);
    this.etag = got.etag; // only once everything it names is handed on
  }

  deliver(messages) {
    for (const m of messages) {
      if (this.closed) return;
      if (m.version <= this.held) continue;
      this.held = m.version;
      this.onBatch(m);
    }
  }
}
