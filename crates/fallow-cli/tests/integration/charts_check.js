// Added to the end of a copy of each HTML page by tests/charts.rs
// (every_page_renders_in_headless_chromium) and run by headless Chromium;
// its findings go into a hidden pre element (id fallow-check) that the test reads
// back with --dump-dom. One line per finding, "FAIL ..." for a defect:
// - the page or a block on it (heading, paragraph, table, figure, chart)
//   runs past the window, unless it sits in a box that scrolls sideways;
// - a chart's text (ticks, labels, direct labels, legend) runs past the chart;
// - two series whose drawn paths (200 points sampled along each, in screen
//   pixels) run within 1 px of each other everywhere share both the dash
//   pattern (computed stroke-dasharray) and the marker shape: one would
//   hide the other;
// - scatter markers (g.point) of two or more series drawn on one another
//   (on-screen centres within the larger marker's radius, at least 2 px;
//   groups joined transitively) without a name for every one of them: one
//   visible text of the chart must name every series of the group, either
//   beside it (within 24 px of the group's markers) or as a caption (a
//   legend entry or a text of class "key"). A marker's series are its
//   data-series lines, else its hover text's lines up to the first ": ".
(function () {
  var W = window.innerWidth, out = [];
  function fail(m) { out.push('FAIL ' + m); }
  var de = document.documentElement;
  out.push('viewport ' + W + ' scrollWidth ' + de.scrollWidth);
  if (de.scrollWidth > W + 1) fail('the page is wider than the window: ' + de.scrollWidth + ' > ' + W);
  function scroller(el) {
    for (var p = el.parentElement; p; p = p.parentElement) {
      var o = getComputedStyle(p).overflowX;
      if (o === 'auto' || o === 'scroll') return p;
    }
    return null;
  }
  var blocks = document.querySelectorAll('h1, h2, h3, p, li, table, figure, svg.chart, pre');
  for (var i = 0; i < blocks.length; i++) {
    var b = blocks[i], r = b.getBoundingClientRect(), s = scroller(b);
    var right = s ? s.getBoundingClientRect().right : r.right;
    if (right > W + 1 || r.left < -1) fail(b.tagName + ' "' + (b.textContent || '').slice(0, 40) + '" runs past the window (' + Math.round(r.left) + '..' + Math.round(right) + ')');
  }
  var svgs = document.querySelectorAll('svg.chart'), pairs = 0, series = 0;
  for (var k = 0; k < svgs.length; k++) {
    var svg = svgs[k], box = svg.getBoundingClientRect(), name = svg.getAttribute('aria-label');
    var texts = svg.querySelectorAll('text');
    for (var t = 0; t < texts.length; t++) {
      var tr = texts[t].getBoundingClientRect();
      if (tr.width === 0) continue;
      if (tr.left < box.left - 1 || tr.right > box.right + 1 || tr.top < box.top - 1 || tr.bottom > box.bottom + 1)
        fail('"' + name + '": ' + texts[t].getAttribute('class') + ' text "' + texts[t].textContent + '" cut off by the chart edge (' + Math.round(tr.left - box.left) + '..' + Math.round(tr.right - box.left) + ' of ' + Math.round(box.width) + ' px)');
    }
    var groups = svg.querySelectorAll('g.series'), lines = [];
    for (var g = 0; g < groups.length; g++) {
      var path = groups[g].querySelector('path.line');
      if (!path) continue;
      var m = path.getScreenCTM(), len = path.getTotalLength(), pts = [];
      for (var j = 0; j <= 200; j++) {
        var p = path.getPointAtLength(len * j / 200);
        pts.push([m.a * p.x + m.c * p.y + m.e, m.b * p.x + m.d * p.y + m.f]);
      }
      var mk = groups[g].querySelector('.mk');
      var ttl = groups[g].querySelector('title');
      lines.push({ name: ttl ? ttl.textContent : '?', pts: pts,
        dash: getComputedStyle(path).strokeDasharray,
        marker: mk ? mk.getAttribute('class').split(' ')[1] : 'none' });
    }
    series += lines.length;
    for (var a = 0; a < lines.length; a++)
      for (var c = a + 1; c < lines.length; c++) {
        if (!near(lines[a].pts, lines[c].pts) || !near(lines[c].pts, lines[a].pts)) continue;
        pairs++;
        if (lines[a].dash === lines[c].dash && lines[a].marker === lines[c].marker)
          fail('"' + name + '": ' + lines[a].name + ' and ' + lines[c].name + ' coincide with the same dash and marker');
      }
  }
  // every sampled point of a within a pixel of the polyline through b's samples
  function near(a, b) {
    for (var i = 0; i < a.length; i++) {
      var ok = false;
      for (var j = 0; j + 1 < b.length && !ok; j++) ok = seg(a[i], b[j], b[j + 1]) <= 1;
      if (!ok) return false;
    }
    return true;
  }
  function seg(p, u, v) {
    var dx = v[0] - u[0], dy = v[1] - u[1], l = dx * dx + dy * dy;
    var f = l > 0 ? Math.max(0, Math.min(1, ((p[0] - u[0]) * dx + (p[1] - u[1]) * dy) / l)) : 0;
    return Math.hypot(p[0] - u[0] - f * dx, p[1] - u[1] - f * dy);
  }
  // scatter markers drawn on one another
  var crowds = 0;
  for (var k = 0; k < svgs.length; k++) {
    var svg = svgs[k], name = svg.getAttribute('aria-label'), mks = [];
    var gp = svg.querySelectorAll('g.point');
    for (var i = 0; i < gp.length; i++) {
      var shape = gp[i].querySelector('.mk');
      if (!shape) continue;
      var r = shape.getBoundingClientRect();
      if (r.width === 0 && r.height === 0) continue;
      var ds = gp[i].getAttribute('data-series'), names;
      if (ds !== null) names = ds.split('\n');
      else {
        var tt = gp[i].querySelector('title');
        names = (tt ? tt.textContent : '?').split('\n').map(function (l) { return l.split(': ')[0]; });
      }
      mks.push({ x: (r.left + r.right) / 2, y: (r.top + r.bottom) / 2,
        r: Math.max(r.width, r.height) / 2, box: r,
        names: names.filter(function (n) { return n.trim() !== ''; }) });
    }
    // transitive groups (union-find)
    var up = mks.map(function (_, i) { return i; });
    function root(i) { while (up[i] !== i) i = up[i] = up[up[i]]; return i; }
    for (var a = 0; a < mks.length; a++)
      for (var c = a + 1; c < mks.length; c++)
        if (Math.hypot(mks[a].x - mks[c].x, mks[a].y - mks[c].y) <= Math.max(mks[a].r, mks[c].r, 2))
          up[root(a)] = root(c);
    var groups = {};
    for (var a = 0; a < mks.length; a++) (groups[root(a)] = groups[root(a)] || []).push(mks[a]);
    var texts = [].slice.call(svg.querySelectorAll('text')).filter(function (t) {
      var b = t.getBoundingClientRect(), st = getComputedStyle(t);
      return b.width > 0 && st.visibility !== 'hidden' && st.display !== 'none' && st.opacity !== '0';
    });
    function flat(x) { return x.replace(/\s+/g, ''); }
    for (var key in groups) {
      var g = groups[key], seen = {};
      g.forEach(function (m) { m.names.forEach(function (n) { seen[n] = true; }); });
      var want = Object.keys(seen);
      if (want.length < 2) continue;
      crowds++;
      var named = texts.some(function (t) {
        var body = flat(t.textContent);
        if (!want.every(function (n) { return body.indexOf(flat(n)) >= 0; })) return false;
        if (t.closest('g.legend') || (t.getAttribute('class') || '').split(' ').indexOf('key') >= 0) return true;
        var b = t.getBoundingClientRect();
        return g.some(function (m) {
          var dx = Math.max(b.left - m.box.right, m.box.left - b.right, 0);
          var dy = Math.max(b.top - m.box.bottom, m.box.top - b.bottom, 0);
          return Math.hypot(dx, dy) <= 24;
        });
      });
      if (!named)
        fail('"' + name + '": ' + g.length + ' markers at (' + Math.round(g[0].x) + ', ' + Math.round(g[0].y) + ') of ' + want.join(', ') + ' overlap with no text naming them all');
    }
  }
  out.push('charts ' + svgs.length + ' series ' + series + ' coinciding-pairs ' + pairs + ' crowded-points ' + crowds);
  var pre = document.createElement('pre');
  pre.id = 'fallow-check';
  pre.hidden = true;
  pre.textContent = out.join('\n');
  document.body.appendChild(pre);
})();
