/* Engram: say something beside the element it is about (issue 37). One helper for the refusal
 * handler of templates/base.html (a refused htmx request, beside the control clicked) and the
 * queue's keys (queue.js: a reason needed, beside the reason field). The alert is a role=alert
 * element right after `el`; said again, the same element is reused: one message, never a pile. */
(function () {
  "use strict";

  function besides(el, testid) {
    var next = el.nextElementSibling;
    return next && next.getAttribute("data-testid") === testid ? next : null;
  }

  window.EngramAlerts = {
    /* Show `text` right after `el`; options: testid (names it), className, tag (default div). */
    show: function (el, text, options) {
      var box = besides(el, options.testid);
      if (!box) {
        box = document.createElement(options.tag || "div");
        box.className = options.className;
        box.setAttribute("role", "alert");
        box.setAttribute("data-testid", options.testid);
        el.insertAdjacentElement("afterend", box);
      }
      box.textContent = text;
      return box;
    },
    /* Remove the alert named `testid` beside `el`, if one is there. */
    clear: function (el, testid) {
      var box = besides(el, testid);
      if (box) box.remove();
    }
  };
})();
