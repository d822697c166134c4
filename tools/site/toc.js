// The sidebar's table of contents on customgrad's site. pkgdown 2.0's
// pkgdown.js calls Toc.init({$nav, $scope}) from bootstrap-toc, which it
// loads from a CDN and no package registry carries; this is customgrad's own
// Toc with that interface (tools/build-site.R puts it in the site). It fills
// <nav id="toc"> with nested lists of links to the headings in $scope, as
// `ul.nav > li > a.nav-link`, the markup pkgdown's CSS and Bootstrap's
// scrollspy expect. Headings marked data-toc-skip are left out; a heading
// with no id of its own or of its section gets one made from its text.
window.Toc = (function () {
  "use strict";

  // The heading's own id, else the id of the section it opens.
  function targetId(heading) {
    if (heading.id) {
      return heading.id;
    }
    var section = heading.closest("section, div.section");
    return section && section.id ? section.id : null;
  }

  // A new id from the heading's text, unique on the page.
  function newId(heading) {
    var base = label(heading).toLowerCase().replace(/[^a-z0-9]+/g, "-");
    base = "toc-" + (base.replace(/^-+|-+$/g, "") || "section");
    var id = base;
    for (var n = 2; document.getElementById(id); n++) {
      id = base + "-" + n;
    }
    return id;
  }

  // The heading's text without the anchor pkgdown appends to it.
  function label(heading) {
    var copy = heading.cloneNode(true);
    copy.querySelectorAll("a.anchor").forEach(function (a) {
      a.remove();
    });
    return copy.textContent.trim();
  }

  function level(heading) {
    return Number(heading.tagName.substring(1));
  }

  function newList() {
    var list = document.createElement("ul");
    list.className = "nav nav-pills flex-column";
    return list;
  }

  function newItem(heading) {
    var item = document.createElement("li");
    item.className = "nav-item";
    var link = document.createElement("a");
    link.className = "nav-link";
    link.href = "#" + targetId(heading);
    link.textContent = label(heading);
    item.appendChild(link);
    return item;
  }

  function init(options) {
    var nav = options.$nav && options.$nav[0];
    if (!nav) {
      return;
    }
    var headings = options.$scope.toArray().filter(function (heading) {
      return !heading.hasAttribute("data-toc-skip");
    });
    headings.forEach(function (heading) {
      if (!targetId(heading)) {
        heading.id = newId(heading);
      }
    });
    if (headings.length === 0) {
      return;
    }
    // Each open list with the heading level of its items and its last item;
    // a deeper heading opens a list inside the last item of the list above.
    var root = newList();
    var open = [{ level: level(headings[0]), list: root, last: null }];
    headings.forEach(function (heading) {
      var depth = level(heading);
      while (open.length > 1 && depth < open[open.length - 1].level) {
        open.pop();
      }
      var current = open[open.length - 1];
      if (depth > current.level && current.last) {
        var nested = newList();
        current.last.appendChild(nested);
        current = { level: depth, list: nested, last: null };
        open.push(current);
      }
      current.last = newItem(heading);
      current.list.appendChild(current.last);
    });
    nav.appendChild(root);
  }

  return { init: init };
})();
