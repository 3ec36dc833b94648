// The smoothed line of a metric chart: TensorBoard's debiased exponential moving average.

/** The smoothing weight a page starts with (its URL's `smooth` when absent). */
export const DEFAULT_SMOOTHING = 0.6;

/**
 * One step of TensorBoard's debiased exponential moving average; NaN/±Inf leave a gap. The average
 * weighs the values so far, so it is kept within their range: a constant's rounding strays from it
 * (0.4 as 0.39999999999999997), and Plotly would draw that as noise on ticks 1e-17 apart.
 */
export function emaStep(state, y, weight) {
  if (y === null || !Number.isFinite(y)) return null;
  state.last = state.last * weight + (1 - weight) * y;
  state.n += 1;
  state.lo = Math.min(state.lo, y);
  state.hi = Math.max(state.hi, y);
  const debias = 1 - Math.pow(weight, state.n);
  return debias > 0 ? Math.min(Math.max(state.last / debias, state.lo), state.hi) : y;
}

/** The smoothed values of a series, and the EMA's state after its last value. */
export function ema(values, weight) {
  const state = { last: 0, n: 0, lo: Infinity, hi: -Infinity };
  return { y: values.map((v) => emaStep(state, v, weight)), state };
}
