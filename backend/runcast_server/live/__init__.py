"""The live stream of a run: replay from the database, then live frames fanned out per process.

One SSE message per committed ingest batch (run ``version``), as written in
docs/CONTRACTS.md ("Live stream") and docs/live.md.

Reading a version. ``store_batch`` writes one ``run_versions`` row per version it
commits: the ``[series_id, first_step, last_step, count]`` ranges of the points it
inserted, the ids of the timeline events it inserted, and the run's status and last
step. ``read_versions`` turns rows ``(after, upto]`` into messages with one range scan
of the ``points`` primary key per series (``points.version`` filters out points of
other versions inside a range), so a replay costs what it returns, not the run's length.

Fan-out. Each API process keeps one ``RunChannel`` per run that has viewers there. The
channel holds the process's one hub subscription for the run and treats hub messages
as doorbells: on a message newer than what it has emitted it reads every version it has
not emitted yet from the database -- once for all its viewers -- encodes each as one SSE
frame (bytes) and appends that same object to every viewer's bounded queue. Reading
"everything after my last version" rather than "the version in the message" makes the
channel immune to doorbells that arrive out of order or not at all (two workers
publishing, a Redis reconnect); a poll of the run's version every few seconds catches
a missed last doorbell. A viewer whose queue is full is dropped: its connection ends
and the client's reconnect (with Last-Event-ID) replays from the database. Nothing a
viewer does can block the channel or another viewer.

Readers. A message's timeline events are shown as ``reads/published.py`` shows them: a
frame holds the public form and, when it differs (a checkpoint path, a run's config or
environment, a private checkpoint), the form for readers with a token of the run's project;
each is encoded once per process, and each viewer is sent the one it may read.

Delay. When the run's publication policy sets ``delay_s`` (policy/delay.py), the channel
sends its frames live to readers of the run's project only. Its one other task
(``_hold``) releases each version to the other readers when it comes due (its
``committed_at`` plus the delay), in order, reading the due versions from the database
at that moment: one timer per channel, not per viewer, and nothing held in memory. A
public reader joins at the last version released (``public``), and its Last-Event-ID
replay reads no further. A policy change (the delay lifted, shortened, or set) resets
the run's viewers; the public ones reset to the new horizon, so whatever the delay no
longer holds back is published at once.

Writing. A viewer's response writes what its queue holds as one chunk (under load several
frames go in one write), and nothing per message arms a timer: one watch task per
process, ``Registry._watch``, sends a keep-alive comment to a viewer idle for
``keepalive_s`` and drops one whose write has not completed in ``send_timeout_s``.

Joining. A viewer registers with the channel first and notes the last version the
channel emitted (``c``), then replays ``(last_event_id, ...]`` from the channel's
recent frames when they cover it, else from the database; afterwards it skips any
queued frame whose version it already sent. Every version after ``c`` reaches the
queue, so there is no gap, and the skip means no duplicate.

The package: ``frames`` (encoding), ``replay`` (reading versions), ``fanout`` (channels,
viewers, the watch), ``stream`` (one viewer's bytes), ``settings``.
"""
