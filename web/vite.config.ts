// Vite build of the web UI. The output directory is chosen by the CMake build
// (web/build_assets.py passes --outDir); the files are embedded into the
// trainwatch binary, so nothing may be fetched from outside at run time.
import { defineConfig } from "vite";

export default defineConfig({
  base: "/",
  build: {
    target: "es2022",
    assetsDir: "assets",
    sourcemap: false,
    emptyOutDir: true,
    chunkSizeWarningLimit: 1000,
  },
});
