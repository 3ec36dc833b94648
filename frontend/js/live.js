// The live stream of one run (docs/live.md): Server-Sent Events, one `batch` message per
// committed ingest batch (its id is the run version), resumable by Last-Event-ID.
//
// EventSource reconnects by itself after a dropped connection and sends Last-Event-ID, so
// the server replays what was missed. When the browser gives up (an HTTP error, a server
// that was down for long), this opens a new EventSource with ?last_event_id=, backing off
// up to 30 s. A subscription starts with `reset` (the current version): everything after it
// arrives as `batch` messages; the page's store reads what came before through REST.
//
// The page's inline head script may have opened the stream already (before Plotly loaded):
// start() takes it over with the messages it kept, in order.

const MAX_BACKOFF_MS = 30000;

export class LiveStream {
  /**
   * onReset(version, {initial, at}): the stream (re)starts after `version`; `at` is when the
   *   reset arrived (performance.now() clock), `initial` for the first one of this page.
   * onBatch(message): {run, version, status, last_step, points, events}.
   * onState(state): "live" | "reconnecting" | "offline" | "unsupported".
   * onComments(message): {run, comment, change} (`event: comments`, outside the versions: it
   *   neither moves the resume point nor takes part in the batch/reset order).
   * onReports(message): {run, report, change} (`event: reports`, outside the versions as comments').
   * onCommands(message): {run, command, change} (`event: commands`, outside the versions as comments').
   */
  constructor(runId, { onBatch, onReset, onState = () => {}, onComments = () => {}, onReports = () => {},
    onCommands = () => {} }, prefetch = null) {
    this.url = "/api/v1/runs/" + encodeURIComponent(runId) + "/stream";
    this.onBatch = onBatch;
    this.onReset = onReset;
    this.onState = onState;
    this.onComments = onComments;
    this.onReports = onReports;
    this.onCommands = onCommands;
    this.prefetch = prefetch;
    this.subscribed = false;
    this.lastId = null;
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
    const pre = this.prefetch;
    if (pre && pre.es && !pre.adopted && pre.streamUrl === this.url) {
      pre.adopted = true;
      this.attach(pre.es);
      const queued = pre.queue;
      pre.queue = [];
      for (const e of queued) (e.type === "reset" ? this.handleReset : this.handleBatch).call(this, e);
      if (pre.opened || pre.es.readyState === EventSource.OPEN) this.handleOpen();
      if (pre.es.readyState === EventSource.CLOSED) this.handleError(pre.es);
      return this;
    }
    const url = this.lastId === null ? this.url : this.url + "?last_event_id=" + encodeURIComponent(this.lastId);
    this.attach(new EventSource(url));
    return this;
  }

  attach(es) {
    this.es = es;
    es.addEventListener("open", () => this.handleOpen());
    es.addEventListener("batch", (e) => this.handleBatch(e));
    es.addEventListener("reset", (e) => this.handleReset(e));
    es.addEventListener("comments", (e) => this.handleComments(e));
    es.addEventListener("reports", (e) => this.handleReports(e));
    es.addEventListener("commands", (e) => this.handleNotice(e, this.onCommands));
    es.addEventListener("error", () => this.handleError(es));
  }

  handleOpen() {
    this.backoff = 1000;
    this.onState("live");
  }

  handleBatch(e) {
    if (e.lastEventId) this.lastId = e.lastEventId;
    let message;
    try {
      message = JSON.parse(e.data);
    } catch {
      return;
    }
    this.onBatch(message);
  }

  handleReports(e) {
    try {
      this.onReports(JSON.parse(e.data));
    } catch {
      /* not JSON: nothing to announce */
    }
  }

  handleNotice(e, callback) {
    try {
      callback(JSON.parse(e.data));
    } catch {
      /* not JSON: nothing to announce */
    }
  }

  handleComments(e) {
    try {
      this.onComments(JSON.parse(e.data));
    } catch {
      /* not JSON: nothing to announce */
    }
  }

  handleReset(e) {
    let version = e.lastEventId ? Number(e.lastEventId) : NaN;
    if (!Number.isFinite(version)) {
      try {
        version = Number(JSON.parse(e.data).version);
      } catch {
        version = NaN;
      }
    }
    if (!Number.isFinite(version)) return;
    this.lastId = String(version);
    const initial = !this.subscribed;
    this.subscribed = true;
    this.onReset(version, { initial, at: e.timeStamp });
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

  close() {
    this.closed = true;
    clearTimeout(this.timer);
    if (this.es) this.es.close();
    const pre = this.prefetch;
    if (pre && pre.es && !pre.adopted) pre.es.close();
  }

  get open() {
    return this.es !== null && this.es.readyState === EventSource.OPEN;
  }

  /** The last version received (a number), or null before the first message. */
  get version() {
    return this.lastId === null ? null : Number(this.lastId);
  }
}
