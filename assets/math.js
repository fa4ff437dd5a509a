// Render the \( \) and \[ \] math that kramdown emits (and that the publisher writes for a
// notebook's Markdown and LaTeX outputs), with the KaTeX copy served by this site (no network
// needed). Bounded: no size above maxSize em (a \rule cannot widen the page), at most maxExpand
// macro expansions (a recursive macro stops), and trust off (no \href, \url or \html* commands).
document.addEventListener("DOMContentLoaded", function () {
  renderMathInElement(document.body, {
    delimiters: [
      { left: "\\[", right: "\\]", display: true },
      { left: "\\(", right: "\\)", display: false },
    ],
    ignoredTags: ["script", "noscript", "style", "textarea", "pre", "code"],
    throwOnError: false,
    trust: false,
    maxSize: 20,
    maxExpand: 500,
  });
});
