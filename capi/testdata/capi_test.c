/* The C ABI's test program, built and run by capi_test.go (go test ./capi, part of make test):
 *
 *   capi_test MODEL.gguf IMG0 IMG1 RGB0 W0 H0 EXPECTED_DEPTH0 EXPECTED_SCENE EXPECTED_POINTS OUT_DIR
 *
 * RGB0 is IMG0's pixels (8-bit RGB, W0 x H0); EXPECTED_DEPTH0 the Go library's depth of IMG0 (raw float32);
 * EXPECTED_SCENE the library's two-view run of IMG0, IMG1 (per view: int32 width, height, then the depth
 * as float32, then the 12 extrinsics as float64); EXPECTED_POINTS the number of points of that scene's
 * point cloud (official selection). All runs at process_res 56 on one thread. Exits 0 when every check
 * passes. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "libda3go.h"

static int failures = 0, checks = 0;

#define CHECK(cond, ...)                                                  \
	do {                                                                  \
		checks++;                                                         \
		if (!(cond)) {                                                    \
			failures++;                                                   \
			fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
			fprintf(stderr, __VA_ARGS__);                                 \
			fprintf(stderr, "\n");                                        \
		}                                                                 \
	} while (0)

static unsigned char *read_file(const char *path, size_t *n) {
	FILE *f = fopen(path, "rb");
	if (!f) {
		perror(path);
		exit(2);
	}
	fseek(f, 0, SEEK_END);
	long size = ftell(f);
	fseek(f, 0, SEEK_SET);
	unsigned char *b = malloc(size > 0 ? (size_t)size : 1);
	if (fread(b, 1, (size_t)size, f) != (size_t)size) {
		perror(path);
		exit(2);
	}
	fclose(f);
	*n = (size_t)size;
	return b;
}

int main(int argc, char **argv) {
	if (argc != 11) {
		fprintf(stderr, "usage: %s MODEL IMG0 IMG1 RGB0 W0 H0 EXPECTED_DEPTH0 EXPECTED_SCENE EXPECTED_POINTS OUT_DIR\n", argv[0]);
		return 2;
	}
	const char *model_path = argv[1], *img0 = argv[2], *img1 = argv[3];
	int w0 = atoi(argv[5]), h0 = atoi(argv[6]), want_points = atoi(argv[9]);
	const char *out_dir = argv[10];
	char *err = NULL;

	CHECK(da3go_abi_version() == 4, "abi version %d", da3go_abi_version());

	/* Errors are values: a message the caller frees, no handle. */
	da3go_model bad = 42;
	CHECK(da3go_load("/nonexistent/model.gguf", NULL, "cpu", 1, &bad, &err) == -1, "loading a missing file fails");
	CHECK(bad == 0, "no handle on failure");
	CHECK(err != NULL && strstr(err, "nonexistent") != NULL, "the error names the file: %s", err ? err : "(null)");
	da3go_free_string(err);
	err = NULL;
	CHECK(da3go_load(NULL, NULL, NULL, 0, &bad, NULL) == -1, "NULL path fails without an error pointer");

	da3go_model m = 0;
	if (da3go_load(model_path, NULL, "cpu", 1, &m, &err) != 0) {
		fprintf(stderr, "FAIL: load %s: %s\n", model_path, err);
		return 1;
	}
	CHECK(m != 0 && err == NULL, "loaded");

	char *info = NULL;
	CHECK(da3go_info_json(m, &info, &err) == 0, "info: %s", err);
	CHECK(info != NULL && strstr(info, "\"camera\":true") != NULL, "info says the model has a camera: %s", info);
	da3go_free_string(info);

	/* Depth of one file equals the Go library's, bit for bit. */
	da3go_options opt = {0};
	opt.process_res = 56;
	size_t n;
	float *want0 = (float *)read_file(argv[7], &n);
	float *depth = NULL;
	int w = 0, h = 0;
	CHECK(da3go_depth(m, img0, &opt, &depth, &w, &h, &err) == 0, "depth: %s", err);
	CHECK(w == w0 && h == h0, "depth at the image size: %dx%d, want %dx%d", w, h, w0, h0);
	CHECK(n == (size_t)w * h * sizeof(float) && memcmp(depth, want0, n) == 0, "depth equals the Go library's");
	da3go_free_buffer(depth);

	/* The same pixels from memory. */
	unsigned char *rgb = read_file(argv[4], &n);
	CHECK(n == (size_t)w0 * h0 * 3, "rgb size");
	depth = NULL;
	CHECK(da3go_depth_rgb(m, rgb, w0, h0, &opt, &depth, &w, &h, &err) == 0, "depth_rgb: %s", err);
	CHECK(depth != NULL && memcmp(depth, want0, (size_t)w * h * sizeof(float)) == 0, "depth from pixels equals depth from the file");
	da3go_free_buffer(depth);
	free(rgb);
	free(want0);

	/* Two views of one scene: depth, confidence and cameras. */
	const char *paths[2] = {img0, img1};
	da3go_view *views = NULL;
	CHECK(da3go_run(m, paths, 2, &opt, &views, &err) == 0, "run: %s", err);
	unsigned char *scene = read_file(argv[8], &n), *p = scene;
	for (int i = 0; views != NULL && i < 2; i++) {
		int32_t sw, sh;
		memcpy(&sw, p, 4);
		memcpy(&sh, p + 4, 4);
		p += 8;
		da3go_view *v = &views[i];
		CHECK(v->width == sw && v->height == sh, "view %d size %dx%d, want %dx%d", i, v->width, v->height, sw, sh);
		CHECK(memcmp(v->depth, p, (size_t)sw * sh * sizeof(float)) == 0, "view %d depth equals the Go library's", i);
		p += (size_t)sw * sh * sizeof(float);
		CHECK(v->conf != NULL && v->sky == NULL, "view %d: confidence, no sky", i);
		CHECK(v->has_camera == 1 && memcmp(v->extrinsics, p, 12 * sizeof(double)) == 0, "view %d extrinsics equal the Go library's", i);
		p += 12 * sizeof(double);
		CHECK(v->unit == DA3GO_UNIT_RELATIVE, "view %d unit %d", i, v->unit);
		CHECK(v->intrinsics[0] > 0 && v->intrinsics[8] == 1, "view %d intrinsics", i);
	}
	CHECK((size_t)(p - scene) == n, "all of the expected scene compared");
	da3go_free_views(views, 2);
	free(scene);

	/* The scene's point cloud and a GLB export. */
	int npts = 0;
	float *xyz = NULL;
	unsigned char *cols = NULL;
	CHECK(da3go_points(m, paths, 2, &opt, 0, &npts, &xyz, &cols, &err) == 0, "points: %s", err);
	CHECK(npts == want_points, "%d points, want %d", npts, want_points);
	da3go_free_buffer(xyz);
	da3go_free_buffer(cols);
	char glb[4096];
	snprintf(glb, sizeof glb, "%s/scene.glb", out_dir);
	CHECK(da3go_export(m, paths, 2, &opt, "glb", glb, &err) == 0, "export glb: %s", err);
	unsigned char *g = read_file(glb, &n);
	CHECK(n > 12 && memcmp(g, "glTF", 4) == 0, "a binary glTF file");
	free(g);
	char mesh[4096];
	snprintf(mesh, sizeof mesh, "%s/mesh.ply", out_dir);
	CHECK(da3go_export(m, paths, 2, &opt, "mesh_ply", mesh, &err) == 0, "export mesh_ply: %s", err);
	g = read_file(mesh, &n);
	static const char mesh_head[] = "ply\nformat binary_little_endian 1.0\ncomment generated by da3-go (TSDF fusion)\n";
	CHECK(n > sizeof mesh_head && memcmp(g, mesh_head, sizeof mesh_head - 1) == 0, "a mesh PLY file");
	free(g);
	CHECK(da3go_export(m, paths, 2, &opt, "obj", glb, &err) == -1 && err && strstr(err, "obj"), "unknown format: %s", err);
	da3go_free_string(err);
	err = NULL;

	/* An export never replaces one of its input images: refused before the model runs, the image intact. */
	char copy0[4096];
	snprintf(copy0, sizeof copy0, "%s/input0.png", out_dir);
	unsigned char *img0_bytes = read_file(img0, &n);
	size_t img0_len = n;
	FILE *cf = fopen(copy0, "wb");
	CHECK(cf && fwrite(img0_bytes, 1, img0_len, cf) == img0_len && fclose(cf) == 0, "copy %s", img0);
	const char *own[2] = {copy0, img1};
	CHECK(da3go_export(m, own, 2, &opt, "npz", copy0, &err) == -1 && err && strstr(err, "overwrite"), "export onto an input: %s", err);
	da3go_free_string(err);
	err = NULL;
	unsigned char *after = read_file(copy0, &n);
	CHECK(n == img0_len && memcmp(after, img0_bytes, n) == 0, "the input image is unchanged");
	free(after);
	free(img0_bytes);

	/* Bad options and inputs are errors too. */
	da3go_options bad_opt = {0};
	bad_opt.method = "stretch";
	CHECK(da3go_depth(m, img0, &bad_opt, &depth, &w, &h, &err) == -1 && err && strstr(err, "stretch"), "bad method: %s", err);
	da3go_free_string(err);
	err = NULL;
	CHECK(da3go_depth(m, "/nonexistent.png", &opt, &depth, &w, &h, &err) == -1 && err != NULL, "missing image");
	da3go_free_string(err);
	err = NULL;
	bad_opt.method = NULL;
	bad_opt.ray_pose = 1;
	CHECK(da3go_depth(m, img0, &bad_opt, &depth, &w, &h, &err) == -1 && err && strstr(err, "ray head"), "ray pose without a ray head: %s", err);
	da3go_free_string(err);
	err = NULL;
	double given_ext[12] = {1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0};
	bad_opt.ray_pose = 0;
	bad_opt.given_extrinsics = given_ext;
	CHECK(da3go_depth(m, img0, &bad_opt, &depth, &w, &h, &err) == -1 && err && strstr(err, "both"), "given extrinsics without intrinsics: %s", err);
	da3go_free_string(err);
	err = NULL;
	double given_k[4] = {60, 60, 25, 16};
	bad_opt.given_intrinsics = given_k;
	bad_opt.process_res = 56;
	CHECK(da3go_depth(m, img0, &bad_opt, &depth, &w, &h, &err) == 0, "depth conditioned on a given camera: %s", err);
	da3go_free_buffer(depth);

	/* Free once; a freed handle is an error, not a crash. */
	CHECK(da3go_free(m, &err) == 0, "free: %s", err);
	CHECK(da3go_free(m, &err) == -1 && err && strstr(err, "invalid model handle"), "double free: %s", err);
	da3go_free_string(err);
	err = NULL;
	CHECK(da3go_depth(m, img0, &opt, &depth, &w, &h, &err) == -1 && err && strstr(err, "invalid model handle"), "use after free: %s", err);
	da3go_free_string(err);

	if (failures > 0) {
		fprintf(stderr, "capi test: %d of %d checks failed\n", failures, checks);
		return 1;
	}
	printf("capi test: all %d checks passed\n", checks);
	return 0;
}
