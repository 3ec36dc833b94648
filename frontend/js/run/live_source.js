// Where the run page's live messages come from: the stream, or the broadcast through a cache
// (docs/live.md, "Following a run through a cache").

import { BroadcastFollower } from "../follow.js";
import { LiveStream } from "../live.js";
import { hasSessionMarker } from "../signin.js";
import { renderStatus } from "./header.js";
import { loadReports } from "./reports.js";

// The server's choice for anonymous viewers (RUNCAST_PUBLIC_FOLLOW, a meta tag of run.html).
const followsThroughCache = () => document.querySelector('meta[name="runcast-follow"]')?.content === "cache";
// The stream's browser-side retries that fail before the page follows through the cache instead.
const STREAM_FAILURES = 3;

/** The team (signed in) gets the stream; anonymous viewers the cache when the server says so. */
export function openLive(page, { onBatch, onReset }) {
  const callbacks = (onFailure) => ({
    onBatch: (m) => onBatch(page, m),
    onReset: (version, info) => onReset(page, version, info),
    onComments: () => page.comments.soon(),
    onReports: () => loadReports(page),
    onCommands: () => page.soon && page.soon.commands(), // the timeline (everyone) and the Control card (the team)
    onState: (s) => {
      page.streamState = s;
      if (page.detail) renderStatus(page);
      if (s === "offline") onFailure();
    },
  });
  const follow = () => {
    page.liveMode = "cache";
    page.stream = new BroadcastFollower(page.runId, callbacks(() => {})).start();
  };
  if (followsThroughCache() && !hasSessionMarker()) return follow();
  let failures = 0;
  page.liveMode = "stream";
  page.stream = new LiveStream(page.runId, callbacks(() => {
    if (++failures < STREAM_FAILURES || page.liveMode !== "stream") return;
    page.stream.close(); // the stream keeps failing: follow the run through the cache
    follow();
  }), page.prefetch).start();
}
