// Which points of a resumed run are the abandoned branch: one rule for the charts and the
// data mix (backend/runcast_server/metrics/branch.py is the same rule for the figures).
//
// A segment that resumes at start_step N continues from the checkpoint of step N (the
// state after step N). So an earlier segment's points at steps > N are abandoned, and its
// point at N stays, unless the later segment logged step N itself: then the later value wins.

/**
 * Whether segment `index`'s point at `step` is abandoned. `segments`: the run's
 * [{index, start_step}]; `holds(index, step)`: whether that segment has a point at `step`.
 */
export function isAbandoned(segments, index, step, holds) {
  return segments.some((s) => s.index > index && (step > s.start_step || (step === s.start_step && holds(s.index, step))));
}

/** The index in `steps` (ascending) of segment `index`'s first abandoned point; `steps.length` if none. */
export function abandonedFrom(segments, index, steps, holds) {
  const i = steps.findIndex((step) => isAbandoned(segments, index, step, holds));
  return i < 0 ? steps.length : i;
}
