import react from '@vitejs/plugin-react';
import { defineConfig } from 'vite';

// The gateway serves dist/ at `/` (CONSOLE_DIR); hashed files under assets/ are cached for a year.
export default defineConfig({
  plugins: [react()],
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    assetsDir: 'assets',
    // The gateway's Content-Security-Policy allows no inline script: every module is a file.
    modulePreload: { polyfill: false },
    sourcemap: false,
  },
  server: {
    // `vite` in development: the API of a running `npm start` on the same origin.
    proxy: { '/v1': 'http://127.0.0.1:8080' },
  },
});
