// A post's few behaviours; without JavaScript the page reads the same, less these.

// Figures keep their text legible: a figure is never drawn so small that its text falls under
// MIN_TEXT_PX CSS px; one that would is drawn that large and scrolls sideways in its own box.
// Vector figures (graphviz graphs, labels of 9 pt and more, sidebyside.lab.viz) keep their natural
// size, where those labels read at 12 px; a PNG's text is PNG_TEXT_PX of its own pixels (viz.style:
// 10 pt at 110 dpi). No figure is drawn past MAX_PX, the bound of the site's CSS, whatever size its
// file claims. A click opens any figure full size.
var MIN_TEXT_PX = 11, PNG_TEXT_PX = 10 * 110 / 72, MAX_PX = 8000;
function sizeFigure(img, scale) {
  var natural = img.naturalWidth, box = img.parentNode.parentNode;
  var least = Math.min(Math.ceil(natural * scale), MAX_PX);
  if (natural && least > box.clientWidth) {
    img.style.maxWidth = MAX_PX + "px";
    img.style.width = least + "px";
    box.classList.add("figure-scroll");
  }
}
document.addEventListener("DOMContentLoaded", function () {
  document.querySelectorAll('.post-content a > img').forEach(function (img) {
    var svg = /\.svg$/.test(img.getAttribute("src") || "");
    var scale = svg ? 1 : Math.min(1, MIN_TEXT_PX / PNG_TEXT_PX);
    if (img.complete) sizeFigure(img, scale); else img.addEventListener("load", function () { sizeFigure(img, scale); });
  });
});

// Side-by-side pairs (sidebyside.publish.pairs): a bar of buttons above each pair shows both frameworks, or
// one only, in every pair of the page. Without JavaScript both columns simply stay visible. Long code is
// shown in a box of fixed height (it scrolls); where a pair's code is longer than its box, the bar's
// "Show all code" button opens the pair to its full length.
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
  function showAll(pair, bar) {
    var clipped = Array.prototype.some.call(pair.querySelectorAll(".pair-code pre"), function (pre) {
      return pre.scrollHeight > pre.clientHeight + 2;
    });
    if (!clipped) return;
    var button = document.createElement("button");
    button.type = "button";
    button.className = "pair-more";
    button.textContent = "Show all code";
    button.setAttribute("aria-expanded", "false");
    button.addEventListener("click", function () {
      var open = pair.classList.toggle("expanded");
      button.textContent = open ? "Show less code" : "Show all code";
      button.setAttribute("aria-expanded", open ? "true" : "false");
    });
    bar.appendChild(button);
  }
  // One bar above each pair; its framework buttons act on every pair of the page, its "Show all code" on its own.
  pairs.forEach(function (pair) {
    var bar = toggle();
    pair.parentNode.insertBefore(bar, pair);
    showAll(pair, bar);
  });
});
