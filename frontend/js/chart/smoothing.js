// The smoothed line of a metric chart: TensorBoard's debiased exponential moving average.

/** The smoothing weight a page starts with (its URL's `smooth` when absent). */
export const DEFAULT_SMOOTHING = 0.6;

/** One step of TensorBoard's debiased exponential moving average; NaN/±Inf leave a gap. */
export function emaStep(state, y, weight) {
  if (y === null || !Number.isFinite(y)) return null;
  state.last = state.last * weight + (1 - weight) * y;
  state.n += 1;
  const debias = 1 - Math.pow(weight, state.n);
  return debias > 0 ? state.last / debias : y;
}

/** The smoothed values of a series, and the EMA's state after its last value. */
export function ema(values, weight) {
  const state = { last: 0, n: 0 };
  return { y: values.map((v) => emaStep(state, v, weight)), state };
}
