// Small live line/area charts on a canvas, for the status page. Each chart keeps no data of its
// own: draw() gets the series to show, oldest point first.

export const COLORS = ['#1f6feb', '#e5534b', '#2da44e', '#bf8700', '#8250df'];

export class Chart {
  // series: [{label, color}]; options: {stacked: bool, min: number, max: number|undefined,
  // format: value -> string (axis labels)}.
  constructor(canvas, series, options = {}) {
    this.canvas = canvas;
    this.series = series;
    this.options = { stacked: false, min: 0, format: (v) => String(v), ...options };
  }

  // values: one array per series, all the same length; null = no value at that point.
  // capacity: how many points the x axis holds (newest at the right edge).
  draw(values, capacity) {
    const canvas = this.canvas;
    const ratio = window.devicePixelRatio || 1;
    const width = canvas.clientWidth;
    const height = canvas.clientHeight;
    if (width === 0 || height === 0) return;
    if (canvas.width !== Math.round(width * ratio) || canvas.height !== Math.round(height * ratio)) {
      canvas.width = Math.round(width * ratio);
      canvas.height = Math.round(height * ratio);
    }
    const ctx = canvas.getContext('2d');
    ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
    ctx.clearRect(0, 0, width, height);
    const styles = getComputedStyle(canvas);
    const grid = styles.getPropertyValue('--chart-grid').trim() || '#e3e6eb';
    const label = styles.getPropertyValue('--chart-label').trim() || '#6b7280';

    const n = values.length ? values[0].length : 0;
    const stacked = this.options.stacked;
    const tops = values.map((s) => s.slice());
    if (stacked) {
      for (let k = 1; k < tops.length; ++k) {
        for (let i = 0; i < n; ++i) tops[k][i] = (tops[k][i] || 0) + (tops[k - 1][i] || 0);
      }
    }
    let max = this.options.max;
    if (max === undefined) {
      max = 0;
      for (const s of tops) for (const v of s) if (v !== null && Number.isFinite(v)) max = Math.max(max, v);
      max = niceCeil(max);
    }
    const min = this.options.min;
    const pad = { left: 4, right: 4, top: 16, bottom: 4 };
    const plotW = width - pad.left - pad.right;
    const plotH = height - pad.top - pad.bottom;
    const x = (i) => pad.left + plotW * (1 - (n - 1 - i) / Math.max(capacity - 1, 1));
    const y = (v) => pad.top + plotH * (1 - (max > min ? (v - min) / (max - min) : 0));

    ctx.strokeStyle = grid;
    ctx.lineWidth = 1;
    for (let g = 0; g <= 2; ++g) {
      const gy = Math.round(pad.top + (plotH * g) / 2) + 0.5;
      ctx.beginPath();
      ctx.moveTo(pad.left, gy);
      ctx.lineTo(width - pad.right, gy);
      ctx.stroke();
    }
    ctx.fillStyle = label;
    ctx.font = '11px system-ui, sans-serif';
    ctx.textBaseline = 'top';
    ctx.fillText(this.options.format(max), pad.left, 1);

    for (let k = tops.length - 1; k >= 0; --k) {
      const color = this.series[k].color;
      const points = [];
      for (let i = 0; i < n; ++i) if (tops[k][i] !== null && Number.isFinite(tops[k][i])) points.push([x(i), y(tops[k][i])]);
      if (points.length === 0) continue;
      if (stacked) {
        ctx.beginPath();
        ctx.moveTo(points[0][0], y(min));
        for (const [px, py] of points) ctx.lineTo(px, py);
        ctx.lineTo(points[points.length - 1][0], y(min));
        ctx.closePath();
        ctx.fillStyle = color + '55';
        ctx.fill();
      }
      ctx.beginPath();
      points.forEach(([px, py], i) => (i === 0 ? ctx.moveTo(px, py) : ctx.lineTo(px, py)));
      ctx.strokeStyle = color;
      ctx.lineWidth = 1.75;
      ctx.stroke();
    }
  }
}

// The smallest 1, 2 or 5 x 10^k at or above v (1 when v is not positive).
export function niceCeil(v) {
  if (!(v > 0)) return 1;
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 2, 5, 10]) if (v <= m * p + 1e-12) return m * p;
  return 10 * p;
}
