// The knowledge graph tab: facts grouped by domain (one compound node per domain, its name on the
// cluster and in the legend), episodes, supersessions and conflicts, drawn with Cytoscape.js.
// Each domain's facts sit in a grid (facts joined by an edge side by side), the clusters in rows,
// an episode beside the facts it wrote; then nodes are pushed apart until no two boxes touch.
// A small graph labels every fact. A dense one (issue 37: ~150 facts were unlabeled dots) labels a
// fact when hovered or selected (with its neighbours) and every fact once zoomed in; a label that
// shows keeps a readable size at any zoom.
(function () {
  const box = document.getElementById("graph");
  if (!box || typeof cytoscape === "undefined") return;
  const DENSE = 60; // more facts and episodes than this: labels on hover, selection or zoom only
  const GAP = 6; // px between two nodes' boxes
  const CLUSTER_GAP = 60; // between two clusters
  const LIT_PX = 12; // a hovered or selected fact's label, and its neighbours', on screen
  const LIT_WIDTH_PX = 180; // … and how wide it may wrap
  const DOMAIN_PX = 14; // a cluster's name, on screen
  const ZOOMED_PX = 13; // a dense graph shows every label once its 10-unit text is this large (zoom ≥ 1.3)
  const TINTS = ["#c9d8fb", "#c6ead3", "#fde0b6", "#f5c9d9", "#d9cdf5", "#c4e8ee", "#eee3a6", "#e2d3c5"];

  // `nodes` in breadth-first order along their edges: facts joined by an edge end up side by side.
  function linkedOrder(nodes) {
    const seen = new Set(), order = [];
    nodes.forEach((start) => {
      if (seen.has(start.id())) return;
      seen.add(start.id());
      for (const queue = [start]; queue.length; ) {
        const node = queue.shift();
        order.push(node);
        node.neighborhood("node").intersection(nodes).forEach((next) => {
          if (!seen.has(next.id())) { seen.add(next.id()); queue.push(next); }
        });
      }
    });
    return order;
  }

  // Where each box goes when they are laid in rows of `perRow`, left to right; and the whole's size.
  function rows(sizes, perRow) {
    const spots = [];
    let x = 0, y = 0, rowHeight = 0, width = 0;
    sizes.forEach((b, i) => {
      if (i > 0 && i % perRow === 0) { x = 0; y += rowHeight + CLUSTER_GAP; rowHeight = 0; }
      spots.push({ x, y });
      x += b.w + CLUSTER_GAP;
      width = Math.max(width, x - CLUSTER_GAP);
      rowHeight = Math.max(rowHeight, b.h);
    });
    return { spots, width, height: y + rowHeight };
  }

  // The rows that fill a box of this width/height ratio best (the largest zoom that fits them all).
  function bestRows(sizes, aspect) {
    let best = null, bestScale = 0;
    for (let perRow = 1; perRow <= Math.max(sizes.length, 1); perRow++) {
      const laid = rows(sizes, perRow);
      const scale = Math.min(aspect / Math.max(laid.width, 1), 1 / Math.max(laid.height, 1));
      if (scale > bestScale) { best = laid; bestScale = scale; }
    }
    return best.spots;
  }

  // Each domain's facts in a grid about as wide as the graph's box is, relative to its height,
  // the clusters in the rows that fill the box best, each episode where the facts it wrote are.
  function clusterLayout(cy, cell) {
    const aspect = box.clientWidth / Math.max(box.clientHeight, 1);
    const domains = cy.nodes(":parent");
    const shape = domains.length > 1 ? Math.sqrt(aspect) : aspect; // several clusters: each squarer
    domains.forEach((domain) => {
      const facts = linkedOrder(domain.children());
      const cols = Math.max(1, Math.round(Math.sqrt((facts.length * shape * cell.h) / cell.w)));
      facts.forEach((fact, i) => fact.position({ x: (i % cols) * cell.w, y: Math.floor(i / cols) * cell.h }));
    });
    const sizes = domains.map((domain) => domain.boundingBox({ includeLabels: true }));
    const spots = bestRows(sizes, aspect);
    domains.forEach((domain, i) => domain.children().shift({ x: spots[i].x - sizes[i].x1, y: spots[i].y - sizes[i].y1 }));
    cy.nodes('[kind = "episode"]').forEach((episode) => {
      const wrote = episode.neighborhood("node");
      if (!wrote.length) return;
      const at = wrote.reduce((sum, n) => ({ x: sum.x + n.position("x"), y: sum.y + n.position("y") }), { x: 0, y: 0 });
      episode.position({ x: at.x / wrote.length, y: at.y / wrote.length });
    });
  }

  // Push apart any two of `items` whose boxes touch (labels included or not), along the axis that
  // needs the smaller move. A cluster moves with everything it holds.
  function separate(items, withLabels) {
    const movers = items.map((item) => (item.isParent() ? item.descendants() : item));
    for (let pass = 0; pass < 80; pass++) {
      let moved = false;
      const boxes = items.map((item) => item.boundingBox({ includeLabels: withLabels }));
      for (let i = 0; i < items.length; i++) {
        for (let j = i + 1; j < items.length; j++) {
          const a = boxes[i], b = boxes[j];
          const dx = Math.min(a.x2, b.x2) - Math.max(a.x1, b.x1) + GAP;
          const dy = Math.min(a.y2, b.y2) - Math.max(a.y1, b.y1) + GAP;
          if (dx <= 0 || dy <= 0) continue;
          moved = true;
          const ca = { x: (a.x1 + a.x2) / 2, y: (a.y1 + a.y2) / 2 }, cb = { x: (b.x1 + b.x2) / 2, y: (b.y1 + b.y2) / 2 };
          // a lone node (an episode) steps out of a cluster's way; two alike share the move
          const share = items[i].isParent() === items[j].isParent() ? 0.5 : items[i].isParent() ? 0 : 1;
          const d = dy < dx ? { x: 0, y: (ca.y <= cb.y ? -dy : dy) } : { x: (ca.x <= cb.x ? -dx : dx), y: 0 };
          const sa = { x: d.x * share, y: d.y * share }, sb = { x: d.x * (share - 1), y: d.y * (share - 1) };
          movers[i].shift(sa);
          movers[j].shift(sb);
          a.x1 += sa.x; a.x2 += sa.x; a.y1 += sa.y; a.y2 += sa.y;
          b.x1 += sb.x; b.x2 += sb.x; b.y1 += sb.y; b.y2 += sb.y;
        }
      }
      if (!moved) return;
    }
  }

  // The domains' names and fact counts above the graph, in their clusters' tints; a click zooms to one.
  function legend(cy) {
    const list = document.getElementById("graph-legend");
    if (!list) return;
    cy.nodes('[kind = "domain"]').forEach((domain) => {
      const item = document.createElement("li");
      const button = document.createElement("button");
      button.type = "button";
      button.style.setProperty("--tint", domain.data("tint"));
      button.textContent = `${domain.data("label")} (${domain.children().length})`;
      button.title = "Zoom to this domain";
      button.addEventListener("click", () => cy.animate({ fit: { eles: domain, padding: 30 }, duration: 250 }));
      item.appendChild(button);
      list.appendChild(item);
    });
    list.hidden = false;
  }

  // Say so when graph.json left facts out (it draws the most recently mentioned ones only).
  function capNote(facts) {
    const note = document.getElementById("graph-cap");
    if (!note || !facts || facts.total <= facts.shown) return;
    const total = `${facts.total.toLocaleString("en")}${facts.capped ? "+" : ""}`;
    note.textContent = `Showing the ${facts.shown} most recently mentioned of ${total} facts: choose a domain or search to see the others.`;
    note.hidden = false;
  }

  fetch(box.dataset.src, { credentials: "same-origin" })
    .then((r) => r.json())
    .then((data) => {
      data.nodes.filter((n) => n.data.kind === "domain").forEach((n, i) => { n.data.tint = TINTS[i % TINTS.length]; });
      const dense = data.nodes.filter((n) => n.data.kind !== "domain").length > DENSE;
      // `px` on screen whatever the zoom, never less than `least` model units
      const onScreen = (px, least) => (node) => `${Math.max(least, px / node.cy().zoom())}px`;
      const cy = cytoscape({
        container: box,
        elements: [...data.nodes, ...data.edges],
        layout: { name: "preset" },
        minZoom: 0.2,
        maxZoom: 3,
        style: [
          {
            selector: "node",
            style: {
              label: "data(label)", "font-size": dense ? 10 : 9, "text-wrap": "wrap", "text-max-width": dense ? 140 : 110,
              "text-valign": "bottom", "text-margin-y": 3, width: dense ? 18 : 14, height: dense ? 18 : 14,
              "text-background-color": "#fff", "text-background-opacity": 0.85, "text-background-padding": 1,
              "min-zoomed-font-size": dense ? ZOOMED_PX : 0,
            },
          },
          {
            selector: "node.lit",
            style: { "font-size": onScreen(LIT_PX, 10), "text-max-width": onScreen(LIT_WIDTH_PX, 110), "min-zoomed-font-size": 0, "z-index": 10, "font-weight": 600 },
          },
          { selector: "node.hover", style: { "z-index": 20, "text-background-opacity": 1 } }, // above its neighbours' labels
          { selector: 'node[kind = "fact"]', style: { "background-color": "#2456c7" } },
          { selector: "node[?superseded]", style: { "background-color": "#9aa3b2" } },
          { selector: 'node[kind = "episode"]', style: { "background-color": "#d9822b", shape: "round-rectangle" } },
          {
            selector: 'node[kind = "domain"]',
            style: {
              shape: "round-rectangle", "background-color": "data(tint)", "background-opacity": 0.45,
              "border-width": 1, "border-color": "#8895ab", padding: 40, "text-valign": "top", "text-halign": "center",
              "compound-sizing-wrt-labels": "exclude", // a label shown on hover does not resize its cluster
              "text-margin-y": -4, "font-size": onScreen(DOMAIN_PX, 12), "font-weight": 600, "min-zoomed-font-size": 0,
              "text-background-opacity": 0,
            },
          },
          { selector: "edge", style: { width: 1.5, "curve-style": "bezier", "target-arrow-shape": "triangle", "line-color": "#8895ab", "target-arrow-color": "#8895ab" } },
          { selector: 'edge[kind = "conflict"]', style: { "line-color": "#b42318", "target-arrow-color": "#b42318" } },
          { selector: 'edge[kind = "episode"]', style: { "line-style": "dotted", "target-arrow-shape": "none" } },
        ],
      });
      clusterLayout(cy, dense ? { w: 150, h: 56 } : { w: 140, h: 64 });
      // each cluster's facts apart, with their labels when every label shows (a small graph)
      cy.nodes(":parent").forEach((domain) => separate(domain.children(), !dense));
      cy.fit(undefined, 20);
      cy.style().update(); // the clusters' names at this zoom, then the clusters apart, names included
      separate(cy.nodes().orphans(), true);
      cy.fit(undefined, 20);

      // Lit: the hovered and the selected facts, with their neighbours.
      function relight() {
        cy.nodes(".lit").removeClass("lit");
        cy.nodes(".hover, :selected").closedNeighborhood().nodes().not(":parent").addClass("lit");
      }
      let restyle = 0;
      cy.on("zoom", () => { cancelAnimationFrame(restyle); restyle = requestAnimationFrame(() => cy.style().update()); });
      cy.on("mouseover", "node:childless", (event) => { event.target.addClass("hover"); relight(); if (event.target.data("url")) box.style.cursor = "pointer"; });
      cy.on("mouseout", "node:childless", (event) => { event.target.removeClass("hover"); relight(); box.style.cursor = ""; });
      cy.on("select unselect", "node", relight);
      // leaving the box fast may skip the node's own mouseout
      box.addEventListener("mouseleave", () => { cy.nodes(".hover").removeClass("hover"); relight(); });
      cy.on("tap", "node", (event) => {
        const node = event.target;
        if (node.isParent()) { cy.animate({ fit: { eles: node, padding: 30 }, duration: 250 }); return; }
        const url = node.data("url");
        if (!url) return;
        const click = event.originalEvent;
        if (click && (click.ctrlKey || click.metaKey)) window.open(url, "_blank", "noopener");
        else window.location.href = url;
      });
      legend(cy);
      capNote(data.facts);
      window.engramGraph = cy; // for the browser tests: positions, labels and styles via cytoscape's API
      box.dataset.dense = String(dense);
      box.dataset.nodes = String(cy.nodes(":childless").length);
    });
})();
