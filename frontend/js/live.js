// The live stream of one run (docs/CONTRACTS.md, "Live stream"): Server-Sent Events,
// one `batch` message per committed ingest batch, resumable by Last-Event-ID.
//
// EventSource reconnects by itself after a dropped connection and sends Last-Event-ID,
// so the server replays what was missed. When the browser gives up (an HTTP error, a
// server that was down for long), this opens a new EventSource with ?last_event_id=,
// backing off up to 30 s. Messages are held until release() so that the page can open
// the stream before its first fetch and lose nothing in between. A fresh subscription
// starts with `reset` (the current version): reads sent after it arrived are current,
// and onSubscribed(time) lets the page re-read only what it read before that.

const MAX_BACKOFF_MS = 30000;

export class LiveStream {
  constructor(runId, { onBatch, onReset, onState = () => {}, onOpen = () => {}, onSubscribed = () => {} }) {
    this.url = "/api/v1/runs/" + encodeURIComponent(runId) + "/stream";
    this.onBatch = onBatch;
    this.onReset = onReset;
    this.onState = onState;
    this.onOpen = onOpen;
    this.onSubscribed = onSubscribed; // (time the first reset arrived, performance.now() clock)
    this.subscribed = false;
    this.lastId = null;
    this.held = [];
    this.holding = true;
    this.es = null;
    this.backoff = 1000;
    this.timer = null;
    this.closed = false;
  }

  start() {
    if (typeof EventSource === "undefined") {
      this.onState("unsupported");
      return this;
    }
    const pre = this.adoptable();
    if (pre) {
      // The page's inline script opened this stream before Plotly loaded: take it over.
      pre.adopted = true;
      this.attach(pre.es);
      for (const e of pre.queue) (e.type === "reset" ? this.handleReset : this.handleBatch).call(this, e);
      pre.queue = [];
      if (pre.opened || pre.es.readyState === EventSource.OPEN) this.handleOpen();
      if (pre.es.readyState === EventSource.CLOSED) this.handleError(pre.es);
      return this;
    }
    const url = this.lastId === null ? this.url : this.url + "?last_event_id=" + encodeURIComponent(this.lastId);
    this.attach(new EventSource(url));
    return this;
  }

  adoptable() {
    const pre = window.__runcastPrefetch;
    if (!pre || !pre.es || pre.adopted || pre.streamUrl !== this.url) return null;
    return pre;
  }

  attach(es) {
    this.es = es;
    es.addEventListener("open", () => this.handleOpen());
    es.addEventListener("batch", (e) => this.handleBatch(e));
    es.addEventListener("reset", (e) => this.handleReset(e));
    es.addEventListener("error", () => this.handleError(es));
  }

  handleOpen() {
    this.backoff = 1000;
    this.onState("live");
    this.onOpen();
  }

  handleBatch(e) {
    if (e.lastEventId) this.lastId = e.lastEventId;
    let message;
    try {
      message = JSON.parse(e.data);
    } catch {
      return;
    }
    if (this.holding) this.held.push(message);
    else this.onBatch(message);
  }

  handleReset(e) {
    // A fresh subscription begins with a reset that names the current version: data read
    // through REST after it arrived is current, so it is not a reason to reload.
    const initial = this.lastId === null && !this.subscribed;
    this.subscribed = true;
    if (e.lastEventId) this.lastId = e.lastEventId;
    else {
      try {
        const v = JSON.parse(e.data).version;
        if (v !== undefined && v !== null) this.lastId = String(v);
      } catch {
        /* keep the last id */
      }
    }
    if (initial) {
      this.onSubscribed(e.timeStamp);
      return;
    }
    this.held = [];
    this.onReset();
  }

  handleError(es) {
    if (this.closed || es !== this.es) return;
    if (es.readyState === EventSource.CLOSED) {
      // The browser will not retry this one (an HTTP error status): we do, with backoff.
      this.onState("offline");
      clearTimeout(this.timer);
      this.timer = setTimeout(() => this.start(), this.backoff);
      this.backoff = Math.min(MAX_BACKOFF_MS, this.backoff * 2);
    } else {
      this.onState("reconnecting");
    }
  }

  /** Deliver held messages and every later one as it comes. */
  release() {
    this.holding = false;
    const held = this.held;
    this.held = [];
    for (const m of held) this.onBatch(m);
  }

  close() {
    this.closed = true;
    clearTimeout(this.timer);
    if (this.es) this.es.close();
    const pre = window.__runcastPrefetch;
    if (pre && pre.es && !pre.adopted && pre.streamUrl === this.url) pre.es.close();
  }

  get open() {
    return this.es !== null && this.es.readyState === EventSource.OPEN;
  }
}
