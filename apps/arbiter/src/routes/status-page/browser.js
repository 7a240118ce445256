
(function(){
  'use strict';
  var cfg = JSON.parse(document.getElementById('hq-initial').textContent);
  var MAX = cfg.maxEvents, every = cfg.refreshSeconds * 1000;
  var rec = cfg.record, lastId = cfg.lastEventId;
  var offset = rec.now - Date.now() / 1000, updated = Date.now();
  function $(id){ return document.getElementById(id); }
  function set(el, text){ if (el && el.textContent !== text) el.textContent = text; }
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
    if (/-refused$/.test(ev) || ev === 'stale-generation' || ev === 'agent-silent') return 'refusal';
    if (ev === 'maintenance') return 'maintenance';
    return 'plain';
  }
  function iso(at){ var d = new Date(at * 1000); return isNaN(d.getTime()) ? String(at) : d.toISOString().replace('T', ' ').replace(/\.\d+Z$/, 'Z'); }
  function summary(data){
    var parts = [];
    Object.keys(data || {}).forEach(function(k){ var v = data[k]; parts.push(k + '=' + (typeof v === 'string' ? v : JSON.stringify(v))); });
    var s = parts.join(' ');
    return s.length > 200 ? s.slice(0, 199) + '\u2026' : s;
  }
  function el(tag, cls, text){ var e = document.createElement(tag); if (cls) e.className = cls; if (text !== undefined) e.textContent = text; return e; }
  function validity(){
    var v = $('validity');
    var cls = 'ok', text;
    if (rec.holder === null) { text = 'no lease'; cls = 'bad'; }
    else if (rec.released) { text = 'released'; cls = 'bad'; }
    else if (rec.expiresAt === null) { text = 'expired'; cls = 'bad'; }
    else {
      var left = rec.expiresAt - now();
      if (left <= 0) { text = 'expired'; cls = 'bad'; }
      else { text = fmt(left) + ' left'; cls = left < rec.ttlSeconds * 0.25 ? 'warn' : 'ok'; }
    }
    set(v, text); if (v.className !== cls) v.className = cls;
    var ld = '';
    if (rec.floorPending) ld = 'lock-delay: pending until every candidate reports its seen generation';
    else if (rec.notBefore !== null && rec.notBefore > now()) ld = 'lock-delay: ' + fmt(rec.notBefore - now()) + ' left';
    set($('lockdelay'), ld);
    var age = (Date.now() - updated) / 1000;
    set($('updated'), 'updated ' + fmt(age) + ' ago');
    var st = $('stale'); st.hidden = age < 3 * cfg.refreshSeconds + 2;
  }
  function renderLease(r){
    rec = r; offset = r.now - Date.now() / 1000;
    set($('holder'), r.holder === null ? 'none' : r.holder);
    set($('generation'), String(r.generation));
    set($('revision'), 'revision ' + r.revision + (r.promotedFrom ? ', promoted from ' + r.promotedFrom : ''));
    set($('streak'), r.dualUnreachableStreak > 0 ? 'dual-unreachable streak: ' + r.dualUnreachableStreak : '');
    validity();
  }
  function cells(h){
    var hb = h.heartbeatText;
    var view = h.view === null ? 'no view' : h.view.target + ' ' + (h.view.reachable ? 'reachable' : 'unreachable') + ' (ping ' + (h.view.ping ? 'ok' : 'no') + ', health ' + (h.view.health ? 'ok' : 'no') + '), ' + fmt(h.view.ageSeconds) + ' ago';
    var load = '\u2014', l = h.load;
    if (l) {
      var p = [];
      if (l.loadAvg && l.loadAvg.length) p.push('load ' + l.loadAvg.map(function(x){ return x.toFixed(2); }).join(' '));
      if (typeof l.cpuCount === 'number') p.push(l.cpuCount + ' cpu');
      if (typeof l.freeMem === 'number' && typeof l.totalMem === 'number' && l.totalMem > 0) p.push('mem ' + Math.round((1 - l.freeMem / l.totalMem) * 100) + '%');
      if (p.length) load = p.join(', ');
    }
    return [['host', 'c-host', h.host], ['role', 'c-role', h.role], ['heartbeat', 'c-heartbeat' + (h.heartbeatProblem ? ' bad' : ''), hb], ['view of holder', 'c-view' + (h.view === null ? '' : h.view.reachable ? ' ok' : ' bad'), view], ['load', 'c-load', load]];
  }
  function renderStatus(s){
    var b = $('banner');
    b.hidden = !s.maintenance.enabled;
    set($('banner-text'), s.maintenance.enabled ? 'Maintenance is on: checks record views but never promote.' + (s.maintenance.reason ? ' Reason: ' + s.maintenance.reason : '') : '');
    var f = s.failover;
    set($('failover'), f.text);
    var tp = $('timing');
    tp.hidden = s.timingProblems.length === 0;
    tp.replaceChildren.apply(tp, s.timingProblems.map(function(p){ return el('li', 'bad', p.message); }));
    var body = $('hosts-body');
    var rows = [];
    s.hosts.forEach(function(h){
      var tr = el('tr', 'role-' + h.role);
      tr.setAttribute('data-host', h.host);
      cells(h).forEach(function(c){ var td = el('td', c[1], c[2]); td.setAttribute('data-label', c[0]); tr.appendChild(td); });
      rows.push(tr);
    });
    body.replaceChildren.apply(body, rows);
  }
  function addEvents(list){
    var ol = $('events');
    list.forEach(function(e){
      if (e.id <= lastId) return;
      lastId = e.id;
      var li = el('li', 'ev ev-' + kind(e.event));
      li.setAttribute('data-id', String(e.id));
      li.appendChild(el('span', 'ev-at', iso(e.at)));
      li.appendChild(document.createTextNode(' '));
      li.appendChild(el('span', 'ev-name', e.event));
      li.appendChild(document.createTextNode(' '));
      li.appendChild(el('span', 'ev-host', e.host === null ? '-' : e.host));
      li.appendChild(document.createTextNode(' '));
      li.appendChild(el('span', 'ev-data', summary(e.data)));
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
  var busy = false;
  function refresh(){
    if (busy) return; busy = true;
    Promise.all([get('v1/lease'), get('v1/status'), get('v1/events?after=' + lastId + '&limit=' + MAX)]).then(function(a){
      updated = Date.now();
      renderLease(a[0]); renderStatus(a[1]); addEvents(a[2].events || []);
      set($('error'), '');
      document.documentElement.setAttribute('data-refreshed', String(updated));
    }).catch(function(err){ set($('error'), String(err && err.message || err)); }).then(function(){ busy = false; });
  }
  setInterval(validity, 1000);
  setInterval(refresh, every);
  document.addEventListener('visibilitychange', function(){ if (!document.hidden) refresh(); });
  refresh();
})();
