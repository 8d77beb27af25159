// Package stream runs Depth Anything 3 over sequences too long for one scene: overlapping windows of views,
// each run as one scene, aligned one to the next by a weighted Sim(3) on the overlapping views' points,
// their results written to disk as they finish and merged into one world frame and one scale.
package stream
