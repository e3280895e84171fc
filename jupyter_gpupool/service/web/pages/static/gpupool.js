// Live refresh for the gpupool pages: regions poll the service's JSON API and update in place.
//
// Markup (rendered by the service's templates):
//   data-live-list="URL" data-list="KEY" data-key="FIELD[/FIELD]"   a <tbody> whose rows follow
//       the list json[KEY]; rows are matched by key and refilled. With data-template="ID" rows
//       are added and removed (cloned from <template id=ID>); without it only known rows change.
//       data-join="URL" data-join-list="KEY" data-join-on="FIELD" data-join-as="NAME": count the
//       items of another list per FIELD into each row's NAME (pending admissions per pool).
//       data-map="URL" data-map-key="KEY" data-map-as="NAME": each row's NAME is json[KEY][row's
//       key] (0 when missing: requests waiting in line per pool).
//       data-where="FIELD" data-where-has="VALUE": only the items whose FIELD is (or, a list,
//       holds) VALUE (the requests waiting for one pool).
//       data-empty="ID": element shown when the list is empty; data-show="ID": element hidden then.
//   data-live-object="URL" [data-list="KEY" data-pick="NAME" | data-sum="KEY"]: an element
//       filled from the answer, one item of its list (by name), or the sums of a list's numbers.
//   data-live-svg="URL" data-every="SECONDS": replaced by the SVG the URL answers.
// Inside them: data-field="a.b" (text), data-format="age|quota|gpus|server|labels|util|memory|idle|notice|spark"
// (the last four: a server's GPU utilization cell, as parts.py writes it), data-format=
// "since|standing|waiting|if" (a request in line: its age from epoch seconds, its standing in
// words, "N waiting" hidden at 0, an element shown only when the field is true), data-badge (status
// colour), data-bar="PART/WHOLE[|WHOLE2]" (bar width), data-href="...{}..." data-href-field,
// input[data-value="FIELD"].
// Forms: input[data-choose="ID=VALUE"] sets the <select id=ID> to VALUE when something is typed
// in it (the reports page's date chooses "since the date").
(function () {
  "use strict";
  const root = document.querySelector(".gpupool");
  if (!root) return;
  const xsrf = (window.jhdata && window.jhdata.xsrf_token) || "";
  const every = 1000 * Number(root.dataset.refresh || 5);
  const BADGES = {
    active: "text-bg-success", degraded: "text-bg-warning", unavailable: "text-bg-danger",
    empty: "text-bg-secondary", unlabeled: "text-bg-warning", running: "text-bg-success",
    starting: "text-bg-info", pending: "text-bg-warning", terminating: "text-bg-secondary",
  };

  function get(url, type) {
    return fetch(url, {
      credentials: "same-origin",
      headers: { "X-XSRFToken": xsrf, Accept: type === "text" ? "image/svg+xml" : "application/json" },
    }).then((r) => {
      if (!r.ok) throw new Error(url + ": " + r.status);
      return type === "text" ? r.text() : r.json();
    });
  }
  function pick(obj, path) {
    return path.split(".").reduce((o, k) => (o == null ? undefined : o[k]), obj);
  }
  // kubectl's AGE (apimachinery's HumanDuration), as core/formatting.py's human_duration
  // renders it on the server: the refreshed ages must read as the first ones did.
  function age(iso) {
    const t = Date.parse(iso);
    if (isNaN(t)) return "-";
    const s = Math.trunc((Date.now() - t) / 1000);
    if (s < -1) return "<invalid>";
    if (s < 0) return "0s";
    if (s < 120) return s + "s";
    const m = Math.floor(s / 60);
    if (m < 10) return s % 60 ? m + "m" + (s % 60) + "s" : m + "m";
    if (m < 180) return m + "m";
    const h = Math.floor(s / 3600);
    if (h < 8) return m % 60 ? h + "h" + (m % 60) + "m" : h + "h";
    if (h < 48) return h + "h";
    const d = Math.floor(h / 24);
    if (h < 192) return h % 24 ? d + "d" + (h % 24) + "h" : d + "d";
    if (d < 730) return d + "d";
    const y = Math.floor(d / 365);
    if (d < 2920) return d % 365 ? y + "y" + (d % 365) + "d" : y + "y";
    return y + "y";
  }
  function show(v) {
    if (v == null || v === "" || (Array.isArray(v) && !v.length)) return "-";
    if (Array.isArray(v)) return v.join(", ");
    if (typeof v === "boolean") return v ? "yes" : "no";
    return String(v);
  }
  // GPUs in a table cell, as templating.gpus writes them: a whole count as it is, GPU-equivalents
  // that are not whole (the API writes 3/7 as 0.429) with two decimals.
  function gpus(v) {
    if (v == null) return "-";
    return typeof v === "number" && !Number.isInteger(v) ? v.toFixed(2) : String(v);
  }
  // A server's GPU utilization cell, made as parts.py makes it (the same rounding).
  function oneDecimal(x) {
    return (Math.floor(x * 10 + 0.5) / 10).toFixed(1);
  }
  function percentText(v) {
    return v == null ? "\u2014" : v + "%";
  }
  function utilText(item) {
    const v = item.gpu_utilization;
    const text = percentText(v);
    return v != null && item.gpu_utilization_shared ? text + " (shared GPU: all its servers)" : text;
  }
  function utilTitle(item) {
    if (item.gpu_utilization_shared) {
      return "the shared GPU's utilization: all the servers on it, not this one alone";
    }
    const what =
      item.gpu_utilization_field === "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
        ? "mean of the server's MIG instances"
        : "mean of the server's GPUs";
    const max = item.gpu_utilization_max;
    return what + (max == null ? "" : "; busiest " + percentText(max));
  }
  function memory(used, total) {
    if (used == null) return "";
    const u = oneDecimal(used / 1024);
    return total == null ? u + " GiB memory" : u + " of " + oneDecimal(total / 1024) + " GiB memory";
  }
  function clock(t) {
    return new Date(t * 1000).toISOString().slice(11, 16) + " UTC";
  }
  function idle(v) {
    if (!v || v.since == null) return "";
    let text = "idle since " + clock(v.since);
    if (v.stops_at != null) text += ", stops at " + clock(v.stops_at);
    else if (v.action === "report") text += ", reported (not stopped)";
    if (v.warned) text += "; its user was warned";
    return text;
  }
  function spark(history) {
    if (!history || history.length < 2) return "";
    const n = history.length, most = 60;
    if (n > most) history = Array.from({ length: most }, (_, i) => history[Math.floor((i * (n - 1)) / (most - 1))]);
    const t0 = history[0][0], span = history[history.length - 1][0] - t0 || 1;
    return history
      .map(([t, p]) => oneDecimal(((t - t0) / span) * 60) + "," + oneDecimal(16 - (Math.max(0, Math.min(100, p)) / 100) * 16))
      .join(" ");
  }
  // A request waiting in line, as parts.py (its standing) and pools.py (the count per pool)
  // write it.
  function standing(within, subject) {
    const words = within ? "within quota" : "over quota";
    return subject ? words + " (" + subject + ")" : words;
  }
  function waiting(n) {
    return n ? n + " waiting" : "";
  }
  function isoSeconds(t) {
    return new Date(Math.floor(t) * 1000).toISOString().replace(/\.\d{3}Z$/, "Z");
  }
  function keyOf(spec, item) {
    return spec.replace(/[A-Za-z_][\w.]*/g, (f) => String(pick(item, f) ?? ""));
  }
  function fill(el, item) {
    el.querySelectorAll("[data-field]").forEach((c) => {
      const v = pick(item, c.dataset.field);
      if (v === undefined && !c.hasAttribute("data-format")) return; // not in this answer
      const fmt = c.dataset.format;
      if (fmt === "age") {
        c.textContent = age(v);
        c.title = v || "";
      } else if (fmt === "since") {
        c.title = v == null ? "" : isoSeconds(v);
        c.textContent = v == null ? "-" : age(c.title);
      } else if (fmt === "standing") {
        c.textContent = standing(v, item.subject);
      } else if (fmt === "waiting") {
        c.textContent = waiting(v);
        c.hidden = !v;
      } else if (fmt === "if") {
        c.hidden = !v;
      } else if (fmt === "server") {
        c.textContent = v || "(default)"; // the default server, as tables.server_words says it
      } else if (fmt === "gpus") {
        c.textContent = gpus(v);
      } else if (fmt === "quota") {
        c.textContent = v ? "over quota (borrowed)" : "within quota";
      } else if (fmt === "util") {
        c.textContent = utilText(item);
        c.title = utilTitle(item);
      } else if (fmt === "memory") {
        c.textContent = memory(v, item.gpu_memory_total_mib);
      } else if (fmt === "idle") {
        c.textContent = idle(v);
        c.hidden = !c.textContent;
      } else if (fmt === "notice") {
        // a server's most urgent notice, as parts.notice_text writes it
        c.textContent = (v && v.words) || "";
        c.hidden = !c.textContent;
        c.classList.toggle("gpupool-notice-stop", !!v && v.action === "stop");
      } else if (fmt === "spark") {
        c.setAttribute("points", spark(v));
      } else if (fmt === "labels") {
        // as macros.html's label_list: folded ("N labels"), kept open if it was, each label
        // breakable after "/", ".", "=", "-" and "_" only (templating.breakable)
        const keys = Object.keys(v || {}).sort();
        const was = c.querySelector("details");
        const list = document.createElement("details");
        list.className = "gpupool-label-list";
        list.open = !!(was && was.open);
        const summary = document.createElement("summary");
        summary.textContent = keys.length + (keys.length === 1 ? " label" : " labels");
        list.append(summary);
        keys.forEach((k) => {
          const s = document.createElement("span");
          s.className = "gpupool-label";
          (k + "=" + v[k]).split(/(?<=[\/.=\-_])/).forEach((part, i) => {
            if (i) s.append(document.createElement("wbr"));
            s.append(part);
          });
          list.append(s, " ");
        });
        c.replaceChildren(list);
      } else {
        c.textContent = show(v);
      }
      if (c.hasAttribute("data-badge")) c.className = "badge " + (BADGES[v] || "text-bg-light");
    });
    el.querySelectorAll("[data-bar]").forEach((b) => {
      const [part, wholes] = b.dataset.bar.split("/");
      const whole = wholes.split("|").map((w) => pick(item, w)).find((w) => w != null);
      const p = Number(pick(item, part) || 0);
      b.style.width = (whole ? Math.min(100, (100 * p) / whole) : 0) + "%";
    });
    el.querySelectorAll("[data-href]").forEach((a) => {
      a.href = a.dataset.href.replace("{}", encodeURIComponent(pick(item, a.dataset.hrefField)));
    });
    el.querySelectorAll("input[data-value]").forEach((i) => {
      i.value = pick(item, i.dataset.value) ?? "";
    });
  }

  async function refreshList(tbody) {
    const answer = await get(tbody.dataset.liveList);
    let items = pick(answer, tbody.dataset.list) || [];
    if (tbody.dataset.where) {
      const has = tbody.dataset.whereHas;
      items = items.filter((it) => [].concat(pick(it, tbody.dataset.where) ?? []).includes(has));
    }
    if (tbody.dataset.map) {
      const map = pick(await get(tbody.dataset.map), tbody.dataset.mapKey) || {};
      items.forEach((it) => (it[tbody.dataset.mapAs] = map[it[tbody.dataset.key]] || 0));
    }
    if (tbody.dataset.join) {
      const other = pick(await get(tbody.dataset.join), tbody.dataset.joinList) || [];
      const counts = {};
      other.forEach((o) => (counts[o[tbody.dataset.joinOn]] = (counts[o[tbody.dataset.joinOn]] || 0) + 1));
      items.forEach((it) => (it[tbody.dataset.joinAs] = counts[it[tbody.dataset.key]] || 0));
    }
    const rows = new Map([...tbody.children].map((r) => [r.dataset.key, r]));
    const keys = items.map((it) => keyOf(tbody.dataset.key, it));
    const template = tbody.dataset.template && document.getElementById(tbody.dataset.template);
    if (template && keys.join("\n") !== [...rows.keys()].join("\n")) {
      const fresh = items.map((it, i) => {
        let row = rows.get(keys[i]);
        if (!row) {
          row = template.content.firstElementChild.cloneNode(true);
          row.dataset.key = keys[i];
        }
        fill(row, it);
        return row;
      });
      tbody.replaceChildren(...fresh);
    } else {
      items.forEach((it, i) => rows.get(keys[i]) && fill(rows.get(keys[i]), it));
    }
    if (tbody.dataset.empty) {
      const note = document.getElementById(tbody.dataset.empty);
      if (note) note.hidden = items.length > 0;
    }
    if (tbody.dataset.show) {
      const shown = document.getElementById(tbody.dataset.show);
      if (shown) shown.hidden = items.length === 0;
    }
  }

  async function refreshObject(el) {
    const answer = await get(el.dataset.liveObject);
    let item = answer;
    if (el.dataset.sum) {
      item = {};
      (pick(answer, el.dataset.sum) || []).forEach((x) =>
        Object.entries(x).forEach(([k, v]) => typeof v === "number" && (item[k] = (item[k] || 0) + v))
      );
    } else if (el.dataset.list) {
      item = (pick(answer, el.dataset.list) || []).find((x) => x.name === el.dataset.pick);
    }
    if (item) fill(el, item);
  }

  async function refreshSvg(el) {
    el.innerHTML = await get(el.dataset.liveSvg, "text");
  }

  function stamp(error) {
    root.classList.toggle("gpupool-stale", Boolean(error));
    const s = root.querySelector("[data-updated]");
    // UTC, as the page was rendered (base.py) and as every time on the pages: 05:06:12 UTC
    const now = new Date().toISOString().slice(11, 19) + " UTC";
    if (s) s.textContent = error ? "could not refresh: " + error : now;
  }

  let ticks = 0;
  async function tick() {
    if (document.hidden) return; // stand by while the tab is hidden
    ticks += 1;
    const jobs = [];
    root.querySelectorAll("[data-live-list]").forEach((t) => jobs.push(refreshList(t)));
    root.querySelectorAll("[data-live-object]").forEach((e) => jobs.push(refreshObject(e)));
    root.querySelectorAll("[data-live-svg]").forEach((e) => {
      const n = Math.max(1, Math.round((1000 * Number(e.dataset.every || 30)) / every));
      if (ticks % n === 0) jobs.push(refreshSvg(e));
    });
    const results = await Promise.allSettled(jobs);
    const failed = results.find((r) => r.status === "rejected");
    stamp(failed ? String(failed.reason && failed.reason.message) : "");
    if (failed) console.warn("gpupool: refresh failed", failed.reason);
  }

  document.addEventListener("input", (ev) => {
    const spec = ev.target.dataset && ev.target.dataset.choose;
    if (!spec || !ev.target.value) return;
    const [id, value] = spec.split("=");
    const select = document.getElementById(id);
    if (select) select.value = value;
  });

  document.addEventListener("submit", (ev) => {
    const msg = ev.target.dataset && ev.target.dataset.confirm;
    if (msg && !window.confirm(msg)) ev.preventDefault();
  });

  if (root.querySelector("[data-live-list], [data-live-object], [data-live-svg]")) {
    root.dataset.liveReady = "1";
    setInterval(tick, every);
  }
})();
