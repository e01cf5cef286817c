// The console's only style sheet and script, served by vqb itself (/console/app.css,
// /console/app.js): no build step, nothing fetched from another site. The pages work without the
// script; it adds drag and drop on the upload form and live progress (server-sent events).

/** Every console page: only our own origin, no inline script or style, no framing. */
export const CONTENT_SECURITY_POLICY =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
  "form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/** The console's icon: a plate's outline with "vqb" (served at /favicon.ico too, so no page logs a 404). */
export const ICON_SVG =
  `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 64 64"><rect x="2" ` +
  `y="14" width="60" height="36" rx="6" fill="#fff" stroke="#0b5fce" stroke-width="4"/><rect x="2" y="14" width="60" height="9" rx="4" fill="#0b5fce"/><text x="32" y="44" font-family="sans-serif" font-size="18" font-weight="700" text-anchor="middle" fill="#1d2430">vqb</text></svg>`;

export const CSS = `
:root { --ink: #1d2430; --muted: #566173; --line: #d5dae1; --accent: #0b5fce; --bad: #b3261e; --good: #1b7f3b; --bg: #f7f8fa; }
* { box-sizing: border-box; }
body { margin: 0; font: 16px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--ink); background: var(--bg); }
a { color: var(--accent); }
:focus-visible { outline: 3px solid #f5a623; outline-offset: 2px; }
.skip { position: absolute; left: -9999px; }
.skip:focus { left: 1rem; top: 1rem; background: #fff; padding: .5rem; z-index: 1; }
header { display: flex; flex-wrap: wrap; gap: 1rem; align-items: center; padding: .75rem 1.5rem; background: #fff; border-bottom: 1px solid var(--line); }
header .brand { font-weight: 700; margin-right: auto; }
header nav { display: flex; gap: 1rem; flex-wrap: wrap; align-items: center; }
header form { margin: 0; }
main { max-width: 72rem; margin: 0 auto; padding: 1.5rem; }
h1 { font-size: 1.5rem; margin: 0 0 1rem; }
h2 { font-size: 1.15rem; margin: 1.5rem 0 .5rem; }
table { border-collapse: collapse; width: 100%; background: #fff; }
th, td { text-align: left; padding: .5rem .6rem; border-bottom: 1px solid var(--line); vertical-align: top; }
th { font-weight: 600; color: var(--muted); font-size: .9rem; }
td.num { font-variant-numeric: tabular-nums; }
progress { width: 8rem; height: 1rem; vertical-align: middle; }
button, .button { font: inherit; padding: .45rem .9rem; border: 1px solid var(--accent); background: var(--accent); color: #fff; border-radius: 4px; cursor: pointer; text-decoration: none; display: inline-block; }
button.secondary, .button.secondary { background: #fff; color: var(--accent); }
button.link { background: none; border: none; color: var(--accent); padding: 0; text-decoration: underline; }
label { display: block; font-weight: 600; margin: .75rem 0 .25rem; }
input[type=password], input[type=text], select { font: inherit; padding: .45rem; border: 1px solid var(--muted); border-radius: 4px; min-width: 20rem; max-width: 100%; }
.help, .muted { color: var(--muted); font-size: .9rem; }
.flash { padding: .6rem .9rem; border-radius: 4px; background: #e6f4ea; border: 1px solid var(--good); }
.error { padding: .6rem .9rem; border-radius: 4px; background: #fdecea; border: 1px solid var(--bad); }
.drop { border: 2px dashed var(--muted); border-radius: 6px; padding: 1.5rem; background: #fff; }
.drop.over { border-color: var(--accent); background: #eef4fd; }
dl.counts { display: grid; grid-template-columns: max-content auto; gap: .25rem 1rem; background: #fff; padding: 1rem; border: 1px solid var(--line); }
dl.counts dt { color: var(--muted); }
dl.counts dd { margin: 0; font-variant-numeric: tabular-nums; }
.actions { display: flex; gap: .75rem; flex-wrap: wrap; align-items: center; margin: 1rem 0; }
.actions form { margin: 0; }
.wait { color: var(--bad); }
/* Said only where the script runs (without it, the Refresh link updates the page). */
.live-note { display: none; }
.js .live-note { display: table-caption; }
/* Charts (charts.ts): plain SVG coloured here (the CSP allows no style attribute). */
.charts .chart-grid { display: grid; grid-template-columns: repeat(auto-fit, minmax(min(100%, 20rem), 1fr)); gap: 1rem; }
figure.chart { margin: 0 0 1rem; background: #fff; border: 1px solid var(--line); padding: .75rem; min-width: 0; }
figure.chart svg { display: block; width: 100%; height: auto; }
figure.chart figcaption { font-size: .9rem; color: var(--muted); margin-top: .25rem; }
figure.chart details { font-size: .9rem; }
figure.chart polyline { fill: none; stroke-width: 2; stroke-linejoin: round; }
figure.chart .done, figure.chart .rate { stroke: var(--good); }
figure.chart .failed { stroke: var(--bad); }
figure.chart .total, figure.chart .limit { stroke: var(--muted); stroke-dasharray: 4 3; stroke-width: 1; }
figure.chart .eta { stroke: var(--accent); stroke-dasharray: 6 4; }
figure.chart .pt { fill: var(--good); }
figure.chart.bar svg { height: 1.5rem; }
.part-done { fill: var(--good); background: var(--good); }
.part-failed { fill: var(--bad); background: var(--bad); }
.part-cancelled { fill: #8a6d00; background: #8a6d00; }
.part-inflight { fill: var(--accent); background: var(--accent); }
.part-queued { fill: var(--line); background: var(--line); }
ul.legend { list-style: none; padding: 0; margin: .25rem 0 0; display: flex; flex-wrap: wrap; gap: .25rem 1rem; }
.swatch { display: inline-block; width: .8rem; height: .8rem; margin-right: .3rem; vertical-align: middle; }
td.use figure.chart { border: 0; padding: 0; margin: 0; min-width: 8rem; }
/* Long ids, file names and URLs wrap anywhere instead of widening the page. Words only at their
   ends: "anywhere" on every cell let a table squeeze its columns down to single letters (issue 36:
   "Cont/a", "concluí/do" in pt-BR at 1280 px); "break-word" breaks only a word longer than its line. */
th, td, dd { overflow-wrap: break-word; }
span.muted, p.muted, code, th[scope=row] a { overflow-wrap: anywhere; }
/* An error code stays whole: underscores are no place to break ("VEHICLE_NOT_FOU/ND"). */
table[data-failed-list] th code { overflow-wrap: normal; }
/* A batch's name and id in the list: one line each, cut with an ellipsis (the whole in its
   title): a long file name wrapped onto five lines at 1280 px (issue 46, 17). */
table.batches .one-line { display: block; max-width: 14rem; white-space: nowrap; overflow: hidden; text-overflow: ellipsis; overflow-wrap: normal; }
table.batches progress { width: 5rem; }
table.batches [data-field=spent] { white-space: nowrap; }
form.search { display: flex; flex-wrap: wrap; gap: .5rem; align-items: center; margin: 0 0 1rem; }
form.search label { margin: 0; flex-basis: 100%; }
input[type=search] { font: inherit; padding: .45rem; border: 1px solid var(--muted); border-radius: 4px; width: 20rem; max-width: 100%; }
/* "100 %" never splits. */
.pct, [data-field=percent] { white-space: nowrap; }
dl.counts { grid-template-columns: minmax(0, max-content) minmax(0, 1fr); }
input[type=url] { font: inherit; padding: .45rem; border: 1px solid var(--muted); border-radius: 4px; width: 100%; max-width: 40rem; }
/* A phone (390 px): tables become one card per row, each cell under its column's name. */
@media (max-width: 44rem) {
  main { padding: 1rem .75rem; }
  header { padding: .5rem .75rem; gap: .5rem; }
  input[type=password], input[type=text], select { min-width: 0; width: 100%; }
  table.stack, table.stack tbody, table.stack tr, table.stack th, table.stack td { display: block; width: 100%; }
  table.stack thead { position: absolute; width: 1px; height: 1px; overflow: hidden; clip: rect(0 0 0 0); }
  table.stack tr { border-bottom: 1px solid var(--line); padding: .4rem 0; }
  table.stack th, table.stack td { border: none; padding: .15rem .6rem; }
  table.stack td[data-label]::before { content: attr(data-label) ": "; color: var(--muted); font-size: .9rem; }
  .js table.stack .live-note { display: block; text-align: left; }
  progress { width: 5rem; }
  dl.counts { grid-template-columns: minmax(0, 1fr) auto; }
}
`;

export const JS = `
'use strict';
(function () {
  document.documentElement.classList.add('js');
  // Drag and drop onto the upload form: the dropped file becomes the file input's file, and the
  // form is sent as it would be without this script.
  var drop = document.querySelector('[data-drop]');
  if (drop) {
    var input = drop.querySelector('input[type=file]');
    var name = drop.querySelector('[data-file-name]');
    var show = function () { if (name && input.files.length) name.textContent = input.files[0].name; };
    input.addEventListener('change', show);
    ['dragenter', 'dragover'].forEach(function (type) {
      drop.addEventListener(type, function (e) { e.preventDefault(); drop.classList.add('over'); });
    });
    ['dragleave', 'drop'].forEach(function (type) {
      drop.addEventListener(type, function () { drop.classList.remove('over'); });
    });
    drop.addEventListener('drop', function (e) {
      e.preventDefault();
      if (e.dataTransfer && e.dataTransfer.files.length) { input.files = e.dataTransfer.files; show(); }
    });
  }

  // Live progress: the server sends the same fields the page shows, by batch id.
  var live = document.querySelector('[data-live]');
  if (live && window.EventSource) {
    var source = new EventSource(live.getAttribute('data-live'));
    // The session ended (signed out, token revoked): no reconnecting.
    source.addEventListener('end', function () { source.close(); });
    source.addEventListener('batches', function (event) {
      var batches = JSON.parse(event.data);
      batches.forEach(function (b) {
        var row = document.querySelector('[data-batch="' + CSS.escape(b.id) + '"]');
        if (!row) return;
        Object.keys(b.fields).forEach(function (field) {
          var cell = row.querySelector('[data-field="' + field + '"]');
          if (cell && cell.textContent !== b.fields[field]) cell.textContent = b.fields[field];
        });
        var bar = row.querySelector('progress');
        if (bar) bar.value = b.percent;
        // A batch's page: its failed plates and their retry buttons, rendered by the server from
        // the same reading, replaced whole when they change (so they never contradict each other).
        var failures = document.querySelector('[data-failures]');
        if (failures && typeof b.failures === 'string' && failures.getAttribute('data-key') !== b.failuresKey) {
          failures.innerHTML = b.failures;
          failures.setAttribute('data-key', b.failuresKey);
        }
      });
    });
  }
})();
`;
