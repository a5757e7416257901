/* The review queue's list (review/templates/review/queue.html), issue 18:
 * - the current entry stays highlighted (is-current, aria-current) across clicks, keys and the
 *   list's refreshes, and the refresh is told which one it is (`current`);
 * - the detail stays in view when an entry low in a long list is opened;
 * - after a decision (`engram:decided` {kind, id} in HX-Trigger) the entry is marked done, what
 *   happened is kept above the detail (#last-outcome), and the next entry is opened;
 * - checked boxes and the bulk reason survive a refresh, and the 15 s poll waits while any is in use;
 * - keys: j/k next/previous, x check the current entry, Escape leaves a field; the item's own
 *   keys come from its buttons (issue 37): data-key clicks, data-key-confirm asks first,
 *   data-key-needs="reason" focuses the reason and Ctrl+Enter decides once one is typed,
 *   data-key-focus="edit" focuses the edit and Ctrl+Enter saves. Enter alone never decides.
 *   The legend (#item-keys) lists exactly the keys of the item shown. Ignored while typing. */
(function () {
  "use strict";

  var ITEM_PATH = /^\/review\/(candidate|conflict|possible|challenged)\/(\d+)\/$/;
  var currentKey = null; // "<kind>-<pk>"
  var pendingNext = null; // the entry just decided, until its outcome is swapped into #detail
  var checked = new Set();
  var bulkReason = "";

  function entries() {
    return Array.prototype.slice.call(document.querySelectorAll("#queue [data-testid=queue-entry]"));
  }
  function entryFor(key) {
    return key ? document.getElementById("entry-" + key) : null;
  }
  function detail() {
    return document.getElementById("detail");
  }

  function markCurrent(li) {
    document.querySelectorAll("#queue .queue-entry.is-current").forEach(function (el) {
      el.classList.remove("is-current");
      el.removeAttribute("aria-current");
    });
    if (!li) return;
    li.classList.add("is-current");
    li.setAttribute("aria-current", "true");
    currentKey = li.id.replace(/^entry-/, "");
    li.scrollIntoView({ block: "nearest" });
  }

  /* Open an entry: its link's own hx-get (so the URL is pushed), or focus a plain link (remember
   * reviews have their own page; Enter opens it). */
  function open(li) {
    if (!li) return;
    markCurrent(li);
    var link = li.querySelector("a[hx-get]");
    if (link) {
      link.click();
    } else {
      var plain = li.querySelector("a");
      if (plain) plain.focus();
    }
  }

  function move(step) {
    var list = entries().filter(function (li) { return !li.classList.contains("is-done"); });
    if (!list.length) return;
    var at = list.indexOf(entryFor(currentKey));
    var next = at === -1 ? (step > 0 ? list[0] : list[list.length - 1]) : list[at + step];
    if (next) open(next);
  }

  /* The next open entry after `key` (or before it when it was the last one). */
  function nextAfter(key) {
    var list = entries();
    var at = list.indexOf(entryFor(key));
    var waiting = function (li) { return !li.classList.contains("is-done") && li.id !== "entry-" + key; };
    var after = list.slice(at + 1).filter(waiting);
    if (after.length) return after[0];
    var before = list.slice(0, Math.max(at, 0)).filter(waiting);
    return before.length ? before[before.length - 1] : null;
  }

  /* Keep the detail in view: the column is sticky on wide screens; on narrow ones, or when it is
   * above or below the viewport anyway, scroll it in. */
  function keepDetailInView() {
    var el = detail();
    if (!el) return;
    var box = el.getBoundingClientRect();
    if (window.matchMedia("(max-width: 900px)").matches || box.top < 0 || box.top > window.innerHeight - 80) {
      el.scrollIntoView({ block: "start" });
    }
  }

  window.engramQueueIdle = function () {
    if (document.querySelector("#queue input[name=items]:checked")) return false;
    var reason = document.querySelector("#bulk input[name=reason]");
    if (reason && reason.value) return false;
    var active = document.activeElement;
    return !(active && active.closest && active.closest("#bulk .bulk-bar"));
  };

  function typing(target) {
    if (!target || !target.closest) return false;
    return !!target.closest("input, textarea, select, [contenteditable=''], [contenteditable=true]");
  }

  /* A key acts on the item shown, never on one being loaded or replaced: while a request for
   * #detail is in flight or its new content settles (htmx has not wired the new buttons yet),
   * the last key's action waits. */
  var inflight = 0;
  var settling = false;
  var deferred = null;
  var busyTimer = null;
  function busy() {
    return inflight > 0 || settling;
  }
  function runDeferred() {
    if (busy() || !deferred) return;
    var fn = deferred;
    deferred = null;
    fn();
  }
  function act(fn) {
    deferred = fn;
    runDeferred();
  }
  function isDetail(target) {
    return !!target && (target.id === "detail" || (target.closest && !!target.closest("#detail")));
  }
  document.addEventListener("htmx:beforeRequest", function (event) {
    if (!isDetail(event.detail.target)) return;
    inflight += 1;
    // Counted off on the request itself: the link that asked may be gone by then (the list
    // refreshed), and htmx's own events on it would no longer reach the document.
    event.detail.xhr.addEventListener("loadend", function () {
      inflight = Math.max(0, inflight - 1);
      runDeferred();
    });
    window.clearTimeout(busyTimer);
    busyTimer = window.setTimeout(function () { inflight = 0; settling = false; }, 10000); // never stuck
  });
  document.addEventListener("htmx:beforeSwap", function (event) {
    if (isDetail(event.detail.target) && event.detail.shouldSwap) settling = true;
  });
  document.addEventListener("htmx:afterRequest", function (event) {
    if (isDetail(event.detail.target) && !event.detail.successful) {
      deferred = null; // nothing new to act on
      settling = false;
    }
  });
  document.addEventListener("htmx:afterSettle", function (event) {
    if (!isDetail(event.detail.target)) return;
    settling = false;
    armed = null;
    showItemKeys();
    runDeferred();
  });

  function focusField(selector) {
    var el = detail() && detail().querySelector(selector);
    if (!el) return null;
    var details = el.closest("details");
    if (details) details.open = true;
    el.focus();
    if (typeof el.select === "function" && el.tagName === "INPUT") el.select();
    return el;
  }

  /* The item's decision keys: its enabled buttons that carry data-key. */
  function keyButtons() {
    var root = detail();
    if (!root) return [];
    return Array.prototype.filter.call(root.querySelectorAll("button[data-key]"), function (b) {
      return !b.matches(":disabled");
    });
  }

  /* The legend shows exactly the keys of the item in front of the reviewer. */
  function showItemKeys() {
    var legend = document.getElementById("item-keys");
    if (!legend) return;
    legend.textContent = "";
    keyButtons().forEach(function (b) {
      var how = b.dataset.keyNeeds ? " (type the reason, then Ctrl+Enter)" : b.dataset.keyConfirm ? " (asks first)" : "";
      var kbd = document.createElement("kbd");
      kbd.textContent = b.dataset.key;
      legend.append(" · ", kbd, " " + b.dataset.keyLabel + how);
    });
  }

  var armed = null; // the button a reason-needing key chose; Ctrl+Enter in the reason presses it

  function pressKey(button) {
    if (button.dataset.keyNeeds) {
      armed = button;
      focusField("[data-field=" + button.dataset.keyNeeds + "]");
    } else if (button.dataset.keyFocus) {
      focusField("[data-field=" + button.dataset.keyFocus + "]");
    } else if (!button.dataset.keyConfirm || window.confirm(button.dataset.keyConfirm)) {
      button.click();
    }
  }

  /* Ctrl+Enter in a field: the decision its key chose, and for a reason only once one is typed. */
  function decideFrom(field) {
    var name = field.dataset.field;
    var button = keyButtons().filter(function (b) {
      return name === "reason" ? b === armed || (!armed && b.dataset.keyNeeds === "reason") : b.dataset.keyFocus === name;
    })[0];
    if (!button) return;
    if (name === "reason" && !field.value.trim()) {
      // Said beside the reason (alerts.js, loaded by base.html).
      window.EngramAlerts.show(field, "Type the reason first: " + button.dataset.keyLabel + " needs one.", {
        testid: "key-hint", className: "field-error", tag: "span"
      });
      return;
    }
    button.click();
  }

  document.addEventListener("keydown", function (event) {
    var target = event.target;
    if (typing(target)) {
      if (event.key === "Escape") {
        target.blur();
        event.preventDefault();
      } else if (event.key === "Enter" && (event.ctrlKey || event.metaKey) && target.matches("#detail [data-field]")) {
        event.preventDefault();
        decideFrom(target);
      } else if (event.key === "Enter" && target.matches("#detail form.decide input")) {
        // Enter alone would submit the form with its first button (approve): it decides nothing.
        event.preventDefault();
      }
      return;
    }
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    switch (event.key) {
      case "j": move(1); break;
      case "k": move(-1); break;
      case "x": {
        var box = entryFor(currentKey) && entryFor(currentKey).querySelector("input[name=items]");
        if (box) {
          box.checked = !box.checked;
          box.dispatchEvent(new Event("change", { bubbles: true }));
        }
        break;
      }
      default: {
        var key = event.key;
        if (!/^[a-z0-9]$/.test(key) || !detail() || !detail().querySelector("button[data-key]")) return;
        act(function () {
          var button = keyButtons().filter(function (b) { return b.dataset.key === key; })[0];
          if (button) pressKey(button);
        });
      }
    }
    event.preventDefault(); // the key must not also type into a field just focused
  });

  document.addEventListener("click", function (event) {
    var link = event.target.closest && event.target.closest("#queue .queue-entry a");
    if (link) markCurrent(link.closest(".queue-entry"));
  });

  document.addEventListener("change", function (event) {
    var box = event.target;
    if (box.matches && box.matches("#queue input[name=items]")) {
      if (box.checked) checked.add(box.value); else checked.delete(box.value);
    }
  });
  document.addEventListener("input", function (event) {
    if (event.target.matches && event.target.matches("#bulk input[name=reason]")) bulkReason = event.target.value;
  });

  document.addEventListener("DOMContentLoaded", function () {
    var here = location.pathname.match(ITEM_PATH);
    var li = here ? entryFor(here[1] + "-" + here[2]) : document.querySelector("#queue .queue-entry.is-current");
    if (li) markCurrent(li);
    showItemKeys();
    document.querySelectorAll("#queue input[name=items]:checked").forEach(function (box) { checked.add(box.value); });
  });

  document.body.addEventListener("htmx:configRequest", function (event) {
    // The list's refresh keeps the highlight server-side too.
    if (event.detail.elt && event.detail.elt.id === "queue" && currentKey) event.detail.parameters.current = currentKey;
  });

  document.body.addEventListener("engram:decided", function (event) {
    var d = event.detail || {};
    var key = d.kind + "-" + d.id;
    var li = entryFor(key);
    if (li) {
      li.classList.add("is-done");
      var box = li.querySelector("input[name=items]");
      if (box) { box.checked = false; checked.delete(box.value); }
    }
    // Chosen now, while the decided entry is still listed (the list refreshes meanwhile).
    var next = nextAfter(key);
    if (pendingNext) window.clearTimeout(pendingNext.timer);
    pendingNext = { next: next ? next.id.replace(/^entry-/, "") : null };
    pendingNext.timer = window.setTimeout(function () { showOutcomeAndOpenNext(); }, 2000);
  });

  /* Once the outcome is in #detail: keep it above the detail (#last-outcome) and open the next. */
  function showOutcomeAndOpenNext() {
    if (!pendingNext) return false;
    var next = entryFor(pendingNext.next);
    window.clearTimeout(pendingNext.timer);
    pendingNext = null;
    if (!next || next.classList.contains("is-done")) return false;
    var outcome = document.getElementById("last-outcome");
    if (outcome && detail()) {
      outcome.innerHTML = detail().innerHTML;
      // A copy: no second element with the item's id, no second "queue-detail".
      outcome.querySelectorAll("[id]").forEach(function (el) { el.removeAttribute("id"); });
      outcome.querySelectorAll("[data-testid=queue-detail]").forEach(function (el) {
        el.setAttribute("data-testid", "last-outcome-item");
      });
      outcome.hidden = false;
    }
    open(next);
    return true;
  }

  document.body.addEventListener("htmx:afterSwap", function (event) {
    var target = event.detail.target;
    var inDetail = target && (target.id === "detail" || (target.closest && target.closest("#detail")) || !document.body.contains(target));
    if (inDetail && target.id !== "queue") {
      if (showOutcomeAndOpenNext()) return;
      keepDetailInView();
    } else {
      restoreList();
    }
  });

  /* After the list was replaced: the highlight, the checked boxes, the bulk reason. */
  function restoreList() {
    var li = entryFor(currentKey);
    if (li) {
      li.classList.add("is-current");
      li.setAttribute("aria-current", "true");
    }
    var still = new Set();
    document.querySelectorAll("#queue input[name=items]").forEach(function (box) {
      if (checked.has(box.value)) { box.checked = true; still.add(box.value); }
    });
    checked = still;
    var reason = document.querySelector("#bulk input[name=reason]");
    if (reason && bulkReason && !reason.value) reason.value = bulkReason;
  }

  // A bulk decision went through: its reason is spent.
  document.body.addEventListener("htmx:afterRequest", function (event) {
    if (event.detail.elt && event.detail.elt.id === "bulk" && event.detail.successful) bulkReason = "";
  });
})();
