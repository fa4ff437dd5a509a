// A post's few behaviours; without JavaScript the page reads the same, less these.

// Large vector figures (graphviz graphs): drawn at their natural size, where their labels (9 pt and
// more, sidebyside.lab.viz) read at 12 px, up to the bound of the site's CSS (max-width and max-height,
// whatever size the file claims); a wider one scrolls sideways in its own box. A click opens any figure
// full size.
function sizeFigure(img) {
  var natural = img.naturalWidth, column = img.parentNode.parentNode.clientWidth;
  if (natural && natural > column) {
    img.style.width = natural + "px";
    img.parentNode.parentNode.classList.add("figure-scroll");
  }
}
document.addEventListener("DOMContentLoaded", function () {
  document.querySelectorAll('.post-content a > img[src$=".svg"]').forEach(function (img) {
    if (img.complete) sizeFigure(img); else img.addEventListener("load", function () { sizeFigure(img); });
  });
});

// Side-by-side pairs (sidebyside.publish.pairs): a bar of buttons above each pair shows both frameworks, or
// one only, in every pair of the page. Without JavaScript both columns simply stay visible.
document.addEventListener("DOMContentLoaded", function () {
  var pairs = document.querySelectorAll(".pair");
  if (!pairs.length) return;
  function toggle() {
    var bar = document.createElement("div");
    bar.className = "pair-toggle";
    bar.setAttribute("role", "group");
    bar.setAttribute("aria-label", "Code shown side by side");
    [["both", "PyTorch and JAX"], ["torch", "PyTorch only"], ["jax", "JAX only"]].forEach(function (choice) {
      var button = document.createElement("button");
      button.type = "button";
      button.textContent = choice[1];
      button.setAttribute("data-show", choice[0]);
      button.setAttribute("aria-pressed", choice[0] === "both" ? "true" : "false");
      button.addEventListener("click", function () {
        document.documentElement.setAttribute("data-pair-show", choice[0]);
        document.querySelectorAll(".pair-toggle button").forEach(function (b) {
          b.setAttribute("aria-pressed", b.getAttribute("data-show") === choice[0] ? "true" : "false");
        });
      });
      bar.appendChild(button);
    });
    return bar;
  }
  // One bar above each pair; they all act on every pair of the page.
  pairs.forEach(function (pair) { pair.parentNode.insertBefore(toggle(), pair); });
});
