// Loads the wfgen-generated classifier (fashion_classifier.js/.wasm), its
// weights (weights.wfparams) and the test images the server holds
// (data/t10k-images-idx3-ubyte and data/t10k-labels-idx1-ubyte, IDX files),
// classifies each image on its own and shows it with its scores and time.
'use strict';

const CLASS_NAMES = ['T-shirt/top', 'Trouser', 'Pullover', 'Dress', 'Coat',
                     'Sandal', 'Shirt', 'Sneaker', 'Bag', 'Ankle boot'];
const PIXELS = 28 * 28;

async function fetchBytes(url) {
  const response = await fetch(url);
  if (!response.ok) throw new Error(`cannot fetch ${url}: ${response.status}`);
  return new Uint8Array(await response.arrayBuffer());
}

// The items of an IDX file of unsigned bytes: {dims, data}.
function readIdx(bytes, what) {
  if (bytes.length < 4 || bytes[0] !== 0 || bytes[1] !== 0 || bytes[2] !== 8) {
    throw new Error(`${what} is not an IDX file of unsigned bytes`);
  }
  const view = new DataView(bytes.buffer, bytes.byteOffset);
  const dims = [];
  for (let d = 0; d < bytes[3]; ++d) dims.push(view.getUint32(4 + 4 * d));
  const offset = 4 + 4 * dims.length;
  return {dims, data: bytes.subarray(offset)};
}

function softmax(scores) {
  const max = Math.max(...scores);
  const e = scores.map((s) => Math.exp(s - max));
  const sum = e.reduce((a, b) => a + b, 0);
  return e.map((v) => v / sum);
}

function card(pixels, label, scores, micros) {
  const best = scores.indexOf(Math.max(...scores));
  const probabilities = softmax(scores);
  const div = document.createElement('div');
  div.className = best === label ? 'card' : 'card wrong';
  div.dataset.predicted = String(best);
  const canvas = document.createElement('canvas');
  canvas.width = 28;
  canvas.height = 28;
  const context = canvas.getContext('2d');
  const image = context.createImageData(28, 28);
  for (let i = 0; i < PIXELS; ++i) {
    const v = 255 - pixels[i];
    image.data.set([v, v, v, 255], 4 * i);
  }
  context.putImageData(image, 0, 0);
  const info = document.createElement('div');
  info.className = 'info';
  info.innerHTML = `<div class="predicted">${CLASS_NAMES[best]}</div>` +
    `<div class="truth">label: ${CLASS_NAMES[label]}</div>` +
    `<div class="time">${micros.toFixed(0)} µs</div>`;
  probabilities.forEach((p, c) => {
    const bar = document.createElement('div');
    bar.className = c === best ? 'bar top' : 'bar';
    bar.innerHTML = `<span>${CLASS_NAMES[c]}</span><div style="width:${(80 * p).toFixed(1)}px"></div>`;
    info.appendChild(bar);
  });
  div.append(canvas, info);
  return div;
}

async function main() {
  const summary = document.getElementById('summary');
  try {
    const module = await createClassifier();
    module.FS.writeFile('/weights.wfparams', await fetchBytes('weights.wfparams'));
    if (module.ccall('wfc_load', 'number', ['string'], ['/weights.wfparams']) !== 0) {
      throw new Error(`loading the weights: ${module.UTF8ToString(module._wfc_error())}`);
    }
    const images = readIdx(await fetchBytes('data/t10k-images-idx3-ubyte'), 'the images');
    const labels = readIdx(await fetchBytes('data/t10k-labels-idx1-ubyte'), 'the labels');
    const n = Math.min(images.dims[0], labels.dims[0]);
    const input = module._malloc(PIXELS * 4);
    const output = module._malloc(10 * 4);
    const grid = document.getElementById('grid');
    let predictions = '';
    let correct = 0;
    const times = [];
    for (let i = 0; i < n; ++i) {
      const pixels = images.data.subarray(i * PIXELS, (i + 1) * PIXELS);
      const floats = Float32Array.from(pixels, (v) => v / 255);
      module.HEAPF32.set(floats, input / 4);
      const t0 = performance.now();
      if (module._wfc_classify(input, 1, output) !== 0) {
        throw new Error(`image ${i}: ${module.UTF8ToString(module._wfc_error())}`);
      }
      const micros = (performance.now() - t0) * 1000;
      times.push(micros);
      const scores = Array.from(module.HEAPF32.subarray(output / 4, output / 4 + 10));
      const best = scores.indexOf(Math.max(...scores));
      predictions += String(best);
      correct += best === labels.data[i] ? 1 : 0;
      grid.appendChild(card(pixels, labels.data[i], scores, micros));
    }
    module._free(input);
    module._free(output);
    document.getElementById('predictions').textContent = predictions;
    // The median: the first call also sets the model up (its memory, the
    // instruction table), and the browser's clock ticks in steps of 0.1 ms.
    const sorted = times.slice().sort((x, y) => x - y);
    summary.textContent = `${n} test images: ${correct} classified right (${(100 * correct / n).toFixed(1)} %), ` +
      `${sorted[Math.floor(n / 2)].toFixed(0)} µs per image (median; the first call ${times[0].toFixed(0)} µs).`;
    document.body.dataset.status = 'done';
  } catch (error) {
    summary.textContent = `Error: ${error.message}`;
    document.body.dataset.status = 'error';
  }
}

main();
