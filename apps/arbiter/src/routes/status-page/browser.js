// The status page's script, inlined by render.ts (the CSP allows it by its hash, computed at
// load). Every few seconds it fetches v1/lease, v1/status and v1/events?after=<last id> and
// rebuilds what changed with textContent and createElement: no value is ever parsed as HTML.
// Texts and colours come from the server's model (v1/status, model.ts); this script only counts
// down and formats the times in new events.
(function(){
  'use strict';
  var cfg = JSON.parse(document.getElementById('hq-initial').textContent);
  var MAX = cfg.maxEvents, every = cfg.refreshSeconds * 1000;
  var rec = cfg.record, phase = cfg.phase, promoteAfter = cfg.promoteAfterChecks, lastId = cfg.lastEventId;
  var offset = rec.now - Date.now() / 1000, updated = Date.now();
  function $(id){ return document.getElementById(id); }
  function set(el, text){ if (el && el.textContent !== text) el.textContent = text; }
  function cls(el, c){ if (el && el.className !== c) el.className = c; }
  function fmt(s){
    if (s === null || s === undefined || !isFinite(s)) return '\u2014';
    var a = Math.abs(s);
    if (a < 120) return s.toFixed(a < 10 ? 1 : 0) + ' s';
    if (a < 7200) return (s / 60).toFixed(1) + ' min';
    if (a < 172800) return (s / 3600).toFixed(1) + ' h';
    return (s / 86400).toFixed(1) + ' d';
  }
  function now(){ return Date.now() / 1000 + offset; }
  function kind(ev){
    if (ev === 'promoted') return 'promotion';
    if (/-refused$/.test(ev) || ev === 'stale-generation' || ev === 'agent-silent' || ev === 'timing-problem' || ev === 'peer-path-broken') return 'refusal';
    if (ev === 'maintenance') return 'maintenance';
    return 'plain';
  }
  // model.ts clockTime: "2027-01-15 08:00:10.5Z".
  function clock(at){
    var d = new Date(at * 1000);
    if (isNaN(d.getTime())) return String(at);
    var s = d.toISOString(), tenths = Math.floor(d.getUTCMilliseconds() / 100);
    return s.slice(0, 10) + ' ' + s.slice(11, 19) + (tenths === 0 ? '' : '.' + tenths) + 'Z';
  }
  // model.ts eventTime: "08:00:10.5Z (+3.0 s)".
  function when(at, eventAt){
    var full = clock(at);
    if (full === String(at)) return full;
    var time = full.slice(0, 10) === clock(eventAt).slice(0, 10) ? full.slice(11) : full;
    var delta = at - eventAt;
    return time + ' (' + (delta >= 0 ? '+' : '') + fmt(delta) + ')';
  }
  // model.ts eventData.
  function summary(e){
    var parts = [], data = e.data || {};
    Object.keys(data).forEach(function(k){
      var v = data[k];
      var time = typeof v === 'number' && (k === 'notBefore' || k === 'was' || /At$/.test(k)) && v > 1e9;
      parts.push(k + '=' + (time ? when(v, e.at) : typeof v === 'string' ? v : JSON.stringify(v)));
    });
    var s = parts.join(' ');
    return s.length > 200 ? s.slice(0, 199) + '\u2026' : s;
  }
  var WAIT_LABELS = { 'lock-delay': 'lock-delay', 'start-wait': "the arbiter's start wait", 'floor-pending': 'floor', confirmation: 'its own confirmation of the old holder' };
  function el(tag, c, text){ var e = document.createElement(tag); if (c) e.className = c; if (text !== undefined) e.textContent = text; return e; }
  // render.ts validityText: green only while the holder reports and may run.
  function validity(){
    var c = 'ok', text;
    if (rec.holder === null) { text = 'no lease'; c = 'bad'; }
    else if (rec.released) { text = 'released'; c = 'bad'; }
    else if (rec.expired || rec.expiresAt === null) { text = 'expired'; c = 'bad'; }
    else if (rec.floorPending) { text = 'may run once every candidate has reported its seen generation'; c = 'warn'; }
    else {
      // protocol runWindow: the validity counts from the end of a wait, so never more than the TTL is shown.
      var t = now(), from = Math.max(t, rec.notBefore === null ? t : rec.notBefore), left = rec.expiresAt - from;
      if (left <= 0) { text = 'expired'; c = 'bad'; }
      else if (from > t) { text = 'may run in ' + fmt(from - t) + ', then for ' + fmt(left) + ' (until ' + clock(rec.expiresAt) + ')'; c = 'warn'; }
      else if (phase.name === 'holder-silent') { text = fmt(left) + ' left' + (rec.renewedAt === null ? '' : ', not renewed for ' + fmt(now() - rec.renewedAt)); c = 'bad'; }
      else { text = fmt(left) + ' left'; c = phase.name === 'lock-delay' || left < rec.ttlSeconds * 0.25 ? 'warn' : 'ok'; }
    }
    set($('validity'), text); cls($('validity'), c);
    // render.ts lockDelayText: the record's wait by its name.
    var ld = '', w = rec.wait || null;
    if (w !== null) {
      var label = WAIT_LABELS[w.kind] || w.kind;
      if (w.until === null) ld = label + ': pending until ' + (w.unreported.length === 0 ? 'the next report' : w.unreported.join(', ') + (w.unreported.length === 1 ? ' reports' : ' report'));
      else if (w.until > now()) ld = label + ': may run in ' + fmt(w.until - now());
    }
    else if (rec.floorPending) ld = 'lock-delay: pending until every candidate reports its seen generation';
    else if (rec.notBefore !== null && rec.notBefore > now()) ld = 'lock-delay: may run in ' + fmt(rec.notBefore - now());
    set($('lockdelay'), ld); cls($('lockdelay'), ld === '' ? '' : 'warn');
    var age = (Date.now() - updated) / 1000;
    set($('updated'), 'updated ' + fmt(age) + ' ago');
    var st = $('stale'); st.hidden = age < 3 * cfg.refreshSeconds + 2;
  }
  function renderLease(r){
    rec = r; offset = r.now - Date.now() / 1000;
    set($('holder'), r.holder === null ? 'none' : r.holder);
    set($('generation'), String(r.generation));
    set($('revision'), 'revision ' + r.revision + (r.promotedFrom ? ', promoted from ' + r.promotedFrom : ''));
    set($('streak'), r.dualUnreachableStreak > 0 ? 'holder unreachable: check ' + r.dualUnreachableStreak + ' of ' + promoteAfter + ' before a promotion' : '');
  }
  function cells(h){
    return [
      ['host', 'c-host', h.host],
      ['role', 'c-role', h.role],
      ['heartbeat', 'c-heartbeat' + (h.heartbeatProblem ? ' bad' : ''), h.heartbeatText],
      ['view of holder', 'c-view ' + h.viewLevel, h.viewText],
      ['load', 'c-load', h.loadText],
      ['version', 'c-version' + (h.upgrade === null ? '' : ' warn'), h.upgrade === null ? h.versionText : h.versionText + '; upgrade it']
    ];
  }
  function renderStatus(s){
    phase = s.phase; promoteAfter = s.failover.promoteAfterChecks;
    var p = $('phase');
    cls(p, 'card phase phase-' + s.phase.level);
    if (p.getAttribute('data-phase') !== s.phase.name) p.setAttribute('data-phase', s.phase.name);
    set($('phase-text'), s.phase.text);
    var b = $('banner');
    b.hidden = !s.maintenance.enabled;
    set($('banner-text'), s.maintenance.enabled ? 'Maintenance is on: checks record views but never promote.' + (s.maintenance.reason ? ' Reason: ' + s.maintenance.reason : '') : '');
    set($('failover'), s.failover.text);
    var tp = $('timing');
    tp.hidden = s.timingProblems.length === 0;
    tp.replaceChildren.apply(tp, s.timingProblems.map(function(x){ return el('li', 'bad', x.message); }));
    var pp = $('peerpaths'), paths = s.peerPaths || [];
    pp.hidden = paths.length === 0;
    pp.replaceChildren.apply(pp, paths.map(function(x){
      var li = el('li', x.ok ? 'ok' : 'bad', x.text);
      li.setAttribute('data-host', x.host); li.setAttribute('data-peer', x.peer);
      return li;
    }));
    var body = $('hosts-body');
    var rows = [];
    s.hosts.forEach(function(h){
      var tr = el('tr', 'role-' + h.role + (h.heartbeatProblem ? ' problem' : ''));
      tr.setAttribute('data-host', h.host);
      cells(h).forEach(function(c){ var td = el('td', c[1], c[2]); td.setAttribute('data-label', c[0]); tr.appendChild(td); });
      rows.push(tr);
    });
    body.replaceChildren.apply(body, rows);
    var a = $('arbiters');
    if (a && s.arbitersLine) { set(a, s.arbitersLine.text); cls(a, s.arbitersLine.level === 'ok' ? '' : s.arbitersLine.level); }
  }
  function addEvents(list){
    var ol = $('events');
    list.forEach(function(e){
      if (e.id <= lastId) return;
      lastId = e.id;
      // model.ts eventLabel: a forced transfer is not a promotion.
      var name = e.event === 'promoted' && e.data && e.data.via === 'transfer' ? 'transferred' : e.event;
      var li = el('li', 'ev ev-' + kind(e.event));
      li.setAttribute('data-id', String(e.id));
      li.appendChild(el('span', 'ev-at', clock(e.at)));
      li.appendChild(document.createTextNode(' '));
      li.appendChild(el('span', 'ev-name', name));
      li.appendChild(document.createTextNode(' '));
      li.appendChild(el('span', 'ev-host', e.host === null ? '-' : e.host));
      li.appendChild(document.createTextNode(' '));
      li.appendChild(el('span', 'ev-data', summary(e)));
      ol.insertBefore(li, ol.firstChild);
    });
    var empty = $('no-events'); if (empty && ol.children.length > 0) empty.remove();
    while (ol.children.length > MAX) ol.removeChild(ol.lastChild);
  }
  function get(path){
    return fetch(path, { cache: 'no-store', credentials: 'same-origin', headers: { accept: 'application/json' } }).then(function(r){
      if (!r.ok) throw new Error(path + ' answered ' + r.status);
      return r.json();
    });
  }
  var busy = false, refreshes = 0;
  function refresh(){
    if (busy) return; busy = true;
    Promise.all([get('v1/lease'), get('v1/status'), get('v1/events?after=' + lastId + '&limit=' + MAX)]).then(function(a){
      updated = Date.now();
      renderLease(a[0]); renderStatus(a[1]); validity(); addEvents(a[2].events || []);
      set($('error'), '');
      document.documentElement.setAttribute('data-refreshed', String(++refreshes));
    }).catch(function(err){ set($('error'), String(err && err.message || err)); }).then(function(){ busy = false; });
  }
  setInterval(validity, 1000);
  setInterval(refresh, every);
  document.addEventListener('visibilitychange', function(){ if (!document.hidden) refresh(); });
  refresh();
})();
