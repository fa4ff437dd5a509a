// Render the \( \) and \[ \] math that kramdown emits (and that the publisher writes for a
// notebook's Markdown and LaTeX outputs), with the KaTeX copy served by this site (no network
// needed). Bounded: no size above maxSize em (a \rule cannot widen the page), at most maxExpand
// macro expansions per formula (KaTeX 0.16.10 and later count \edef's too, so a recursive or
// exploding macro stops), trust off (no \href, \url or \html* commands), and at most BUDGET_MS of
// rendering per page: what is left after it stays as its TeX. Each text holding math renders on its
// own, so a formula that throws (a ParseError is shown in red by KaTeX; anything else, such as a
// stack overflow, leaves that text as TeX) never stops the others.
(function () {
  var BUDGET_MS = 3000;
  var OPTIONS = {
    delimiters: [
      { left: "\\[", right: "\\]", display: true },
      { left: "\\(", right: "\\)", display: false },
    ],
    ignoredTags: ["script", "noscript", "style", "textarea", "pre", "code"],
    throwOnError: false,
    trust: false,
    maxSize: 20,
    maxExpand: 500,
  };
  var IGNORED = new Set(OPTIONS.ignoredTags.map(function (t) { return t.toUpperCase(); }));

  function textsWithMath(root) {
    var found = [];
    var walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT, {
      acceptNode: function (node) {
        for (var el = node.parentElement; el && el !== root; el = el.parentElement) {
          if (IGNORED.has(el.tagName) || el.classList.contains("katex")) return NodeFilter.FILTER_REJECT;
        }
        return /\\[([]/.test(node.nodeValue) ? NodeFilter.FILTER_ACCEPT : NodeFilter.FILTER_REJECT;
      },
    });
    while (walker.nextNode()) found.push(walker.currentNode);
    return found;
  }

  document.addEventListener("DOMContentLoaded", function () {
    var started = performance.now();
    var texts = textsWithMath(document.body);
    for (var i = 0; i < texts.length; i++) {
      if (performance.now() - started > BUDGET_MS) {
        document.body.setAttribute("data-math-unrendered", String(texts.length - i));
        return;
      }
      var span = document.createElement("span");
      texts[i].parentNode.replaceChild(span, texts[i]);
      span.appendChild(texts[i]);
      try {
        renderMathInElement(span, OPTIONS);
      } catch (error) {
        span.textContent = texts[i].nodeValue;
        span.className = "math-error";
        span.title = "This formula could not be rendered: " + String(error && error.name);
      }
    }
  });
})();
