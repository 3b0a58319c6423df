// Inline-SVG sparkline: scale a series of numbers into a <polyline> points string.
// Same geometry as playground/sparkline.py (server-side charts). No chart library.

export function sparklinePoints(values, width = 160, height = 40, pad = 2, maxPoints = 120) {
  if (!values.length) return "";
  let series = values;
  if (values.length > maxPoints) {
    // Downsample by averaging buckets so a 2,000-frame run still draws 120 points.
    series = [];
    const bucket = values.length / maxPoints;
    for (let i = 0; i < maxPoints; i++) {
      const from = Math.floor(i * bucket), to = Math.max(from + 1, Math.floor((i + 1) * bucket));
      let sum = 0;
      for (let j = from; j < to; j++) sum += values[j];
      series.push(sum / (to - from));
    }
  }
  const top = Math.max(...series) || 1;
  const step = (width - 2 * pad) / Math.max(series.length - 1, 1);
  return series
    .map((v, i) => `${(pad + i * step).toFixed(1)},${(height - pad - (Math.max(v, 0) / top) * (height - 2 * pad)).toFixed(1)}`)
    .join(" ");
}
