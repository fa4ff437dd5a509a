// Render the \( \) and \[ \] math that kramdown emits (and that the publisher writes for a
// notebook's Markdown and LaTeX outputs), with the KaTeX copy served by this site (no network
// needed). Bounded: no size above maxSize em (a \rule cannot widen the page), at most maxExpand
// macro expansions per formula (KaTeX 0.16.10 and later count \edef's too, so a recursive or
// exploding macro stops), at most TOKEN_BUDGET tokens read by KaTeX's macro expander per text
// (counted by the macro table KaTeX asks about each token, budgeted()): maxExpand alone lets a
// macro whose body is long, or whose argument doubles at each expansion, make hundreds of
// thousands of tokens (200 expansions of a 1,000-token body: seconds of work); past the budget the
// formula is shown as KaTeX's error. Trust off (no \href, \url or \html* commands), and at most
// BUDGET_MS of rendering per page: what is left after it stays as its TeX. Each text holding math
// renders on its own, so a formula that throws (a ParseError is shown in red by KaTeX; anything
// else, such as a stack overflow, leaves that text as TeX) never stops the others.
(function () {
  var BUDGET_MS = 3000;
  var TOKEN_BUDGET = 20000;
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

  // A macro table for one text's formulas: KaTeX's expander asks it whether it defines each token it
  // reads (Object.prototype.hasOwnProperty, a getOwnPropertyDescriptor here), so the asking is
  // counted, and past TOKEN_BUDGET a ParseError stops that formula (KaTeX shows it in red).
  function budgeted() {
    var asked = 0;
    return new Proxy({}, {
      getOwnPropertyDescriptor: function (target, name) {
        asked += 1;
        if (asked > TOKEN_BUDGET) {
          throw new katex.ParseError("Too many tokens: this formula's macros expand past the page's " +
                                     "budget of " + TOKEN_BUDGET + " tokens");
        }
        return Reflect.getOwnPropertyDescriptor(target, name);
      },
    });
  }

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
        break;
      }
      var span = document.createElement("span");
      texts[i].parentNode.replaceChild(span, texts[i]);
      span.appendChild(texts[i]);
      try {
        renderMathInElement(span, Object.assign({}, OPTIONS, { macros: budgeted() }));
      } catch (error) {
        span.textContent = texts[i].nodeValue;
        span.className = "math-error";
        span.title = "This formula could not be rendered: " + String(error && error.name);
      }
    }
    // how long the page's math took (milliseconds), for a reader's tools and the browser tests
    document.body.setAttribute("data-math-ms", String(Math.round(performance.now() - started)));
  });
})();
